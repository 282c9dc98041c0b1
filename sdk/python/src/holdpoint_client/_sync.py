"""``Holdpoint``: the blocking client."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any

import httpx

from . import _core
from ._errors import ApiError
from ._types import (
    Action,
    ApprovalResult,
    AskResult,
    Assignee,
    Event,
    FormField,
    Grant,
    JsonObject,
    JsonValue,
    Option,
    Page,
    Question,
    QuestionKind,
    Response,
    ResponseType,
    UploadedFile,
    Urgency,
    timeout_to_seconds,
)


class Holdpoint:
    """A connection to a Holdpoint server, acting with one API token.

    ``url`` and ``token`` default to ``HOLDPOINT_SERVER`` and ``HOLDPOINT_TOKEN``. Agents ask with an ``agent`` token
    (it may ask and read its own questions, never answer); people's tools answer with a ``responder``, ``approver``
    or ``admin`` token. Use it as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: _core.RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.url, token = _core.resolve_url_and_token(url, token)
        self._retry = retry or _core.RetryPolicy()
        self._timeout = timeout
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client()
        self._headers = _core.default_headers(token)
        self._timeout_bounds: _core.TimeoutBounds | None = None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Holdpoint:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Holdpoint({self.url!r})"

    # Questions -------------------------------------------------------------------------------------------------

    def ask(
        self,
        title: str,
        *,
        kind: QuestionKind | None = None,
        response_type: ResponseType | None = None,
        body: str | None = None,
        options: Sequence[Option | str] | None = None,
        fields: Sequence[FormField] | None = None,
        response_schema: Mapping[str, JsonValue] | None = None,
        action: Action | None = None,
        allow_edit: bool = False,
        context: Mapping[str, JsonValue] | None = None,
        project: str | None = None,
        run_id: str | None = None,
        urgency: Urgency | None = None,
        timeout_seconds: float | timedelta | None = None,
        default_response: Response | JsonValue = None,
        assignee: Assignee | None = None,
        callback_url: str | None = None,
        required_approvals: int | None = None,
        eligible: Mapping[str, JsonValue] | None = None,
        extra: Mapping[str, JsonValue] | None = None,
        idempotency_key: str | None = None,
        wait: bool | None = None,
        wait_timeout: float | timedelta | None = None,
    ) -> AskResult:
        """Asks a person and waits for the outcome.

        Takes every field of ``POST /questions`` (``extra`` adds fields this version does not name). Waits until the
        question is answered, defaulted, expired or cancelled (its ``timeout_seconds`` bounds that), or for at most
        ``wait_timeout`` (then ``outcome`` is ``pending``). ``wait`` defaults to true except for ``non_blocking``
        questions, which an agent asks and goes on. The same ``idempotency_key`` asks once, however often it is
        called: a restarted agent gets the first question (and its answer) back.
        """
        question = self.create_question(
            title,
            kind=kind,
            response_type=response_type,
            body=body,
            options=options,
            fields=fields,
            response_schema=response_schema,
            action=action,
            allow_edit=allow_edit,
            context=context,
            project=project,
            run_id=run_id,
            urgency=urgency,
            timeout_seconds=timeout_seconds,
            default_response=default_response,
            assignee=assignee,
            callback_url=callback_url,
            required_approvals=required_approvals,
            eligible=eligible,
            extra=extra,
            idempotency_key=idempotency_key,
        )
        if wait is False or (wait is None and question.kind == "non_blocking") or not question.pending:
            return AskResult(question)
        return self.wait(question.id, timeout=wait_timeout)

    def create_question(
        self,
        title: str,
        *,
        kind: QuestionKind | None = None,
        response_type: ResponseType | None = None,
        body: str | None = None,
        options: Sequence[Option | str] | None = None,
        fields: Sequence[FormField] | None = None,
        response_schema: Mapping[str, JsonValue] | None = None,
        action: Action | None = None,
        allow_edit: bool = False,
        context: Mapping[str, JsonValue] | None = None,
        project: str | None = None,
        run_id: str | None = None,
        urgency: Urgency | None = None,
        timeout_seconds: float | timedelta | None = None,
        default_response: Response | JsonValue = None,
        assignee: Assignee | None = None,
        callback_url: str | None = None,
        required_approvals: int | None = None,
        eligible: Mapping[str, JsonValue] | None = None,
        extra: Mapping[str, JsonValue] | None = None,
        idempotency_key: str | None = None,
    ) -> Question:
        """``POST /questions`` without waiting. Retried safely: without an ``idempotency_key`` one is made up for
        this call, so a retry after a lost response returns the question the first attempt created."""
        payload = _core.question_body(
            title,
            kind=kind,
            response_type=response_type,
            body=body,
            options=options,
            fields=fields,
            response_schema=response_schema,
            action=action,
            allow_edit=allow_edit,
            context=context,
            project=project,
            run_id=run_id,
            urgency=urgency,
            timeout_seconds=timeout_seconds,
            default_response=default_response,
            assignee=assignee,
            callback_url=callback_url,
            required_approvals=required_approvals,
            eligible=eligible,
            extra=extra,
        )
        key = idempotency_key or _core.new_idempotency_key()
        return Question.from_json(self._call("POST", "/questions", json=payload, idempotency_key=key))

    def approve(
        self,
        tool_name: str,
        arguments: Mapping[str, JsonValue] | None = None,
        *,
        title: str | None = None,
        body: str | None = None,
        allow_edit: bool = False,
        context: Mapping[str, JsonValue] | None = None,
        project: str | None = None,
        run_id: str | None = None,
        urgency: Urgency | None = None,
        timeout_seconds: float | timedelta | None = None,
        default: bool | None = None,
        assignee: Assignee | None = None,
        callback_url: str | None = None,
        required_approvals: int | None = None,
        eligible: Mapping[str, JsonValue] | None = None,
        idempotency_key: str | None = None,
        wait: bool = True,
        wait_timeout: float | timedelta | None = None,
        agent: str | None = None,
    ) -> ApprovalResult:
        """Asks the workspace's approval rules for permission to call one tool (``POST /decide``) and waits for the
        decision.

        A call the rules allow comes back at once (``outcome == "allowed_by_rule"``, or ``"allowed_by_grant"``), one
        they deny too (``"denied_by_rule"``, with ``result.rule`` and ``result.rule_reason``); neither asks anyone.
        Otherwise a person is asked: the other fields shape that question wherever the deciding rule's ``ask`` is
        silent (the rule's settings win; ``default`` applies only when no rule, but the document's default, asked).
        ``result.approved`` says whether to run the call, with ``result.arguments`` (the approver's edit when
        ``allow_edit`` let them make one); ``result.reason()`` is what to tell a model that may not. Without a
        ``default`` an approval nobody decides expires (not approved, and ``outcome == "expired"`` rather than a
        person's "no"). ``agent`` is the name the rules' ``agents`` globs match (the token's name by default); the
        same ``idempotency_key`` asks once, however often it is called.
        """
        limit = timeout_to_seconds(wait_timeout)
        deadline = None if limit is None else time.monotonic() + limit
        payload = _core.decide_body(
            tool_name,
            arguments,
            agent=agent,
            run_id=run_id,
            wait=_core.decide_waits(wait, limit),
            title=title,
            body=body,
            allow_edit=allow_edit,
            context=context,
            project=project,
            urgency=urgency,
            timeout_seconds=timeout_seconds,
            default=default,
            assignee=assignee,
            callback_url=callback_url,
            required_approvals=required_approvals,
            eligible=eligible,
        )
        key = idempotency_key or _core.new_idempotency_key()
        held = _core.MAX_WAIT_SECONDS + 15.0 if payload["wait"] else None
        data = self._call("POST", "/decide", json=payload, idempotency_key=key, read_timeout=held)
        result = ApprovalResult.from_decision(data, payload["arguments"])
        if not wait or result.question is None or not result.question.pending:
            return result
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        waited = self.wait(result.question.id, timeout=remaining)
        return result.waited(waited.question)

    def wait(self, question_id: str, *, timeout: float | timedelta | None = None) -> AskResult:
        """Waits until the question is no longer pending, or for at most ``timeout`` seconds; each round trip is
        one long-poll of ``/questions/{id}/wait``, woken by the resolution itself."""
        limit = timeout_to_seconds(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        path = f"/questions/{_core.path_segment(question_id)}/wait"
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return AskResult(self.get_question(question_id))
            seconds = _core.wait_slice(remaining)
            data = self._call("GET", path, params={"timeout_seconds": str(seconds)}, read_timeout=seconds + 15.0)
            question = Question.from_json(data)
            if not question.pending:
                return AskResult(question)

    def get_question(self, question_id: str) -> Question:
        return Question.from_json(self._call("GET", f"/questions/{_core.path_segment(question_id)}"))

    def timeout_bounds(self) -> _core.TimeoutBounds:
        """The question timeouts the server takes (``timeout_seconds``), as its OpenAPI document publishes them;
        read once per client."""
        if self._timeout_bounds is None:
            self._timeout_bounds = _core.timeout_bounds(self._call("GET", "/openapi.json"))
        return self._timeout_bounds

    def list_questions(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        project: str | None = None,
        urgency: str | None = None,
        run_id: str | None = None,
        q: str | None = None,
        sort: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page:
        params = _core.list_params(
            status=status,
            kind=kind,
            project=project,
            urgency=urgency,
            run_id=run_id,
            q=q,
            sort=sort,
            limit=limit,
            cursor=cursor,
        )
        return _core.page_from_json(self._call("GET", "/questions", params=params))

    def answer(
        self,
        question_id: str,
        value: JsonValue,
        *,
        comment: str | None = None,
        edited_arguments: Mapping[str, JsonValue] | None = None,
        grant: Mapping[str, JsonValue] | None = None,
    ) -> Question:
        """Answers a question as this token's person (``responder`` and up; approvals need ``approver``). An approval
        of a question that needs several returns it still pending, with one approval more. ``grant`` makes the
        approval of a tool call an "always allow" rule: ``{"scope": "run" | "agent" | "workspace", "matcher"?:
        {"command_prefix": ...} | {"equals": ...}, "expires_in_seconds"?: ...}``."""
        return Question.from_json(
            self._call(
                "POST",
                f"/questions/{_core.path_segment(question_id)}/answer",
                json=_core.answer_body(value, comment, edited_arguments, grant),
            )
        )

    def claim(self, question_id: str, *, ttl_seconds: int | None = None) -> Question:
        """Claims a pending question for this token's person: while the claim lasts (``ttl_seconds``, at most the
        server's longest, 30 minutes by default) only they or an admin may answer; others get a ``ConflictError``
        naming them."""
        payload: JsonObject = {"ttl_seconds": ttl_seconds} if ttl_seconds is not None else {}
        path = f"/questions/{_core.path_segment(question_id)}/claim"
        return Question.from_json(self._call("POST", path, json=payload))

    def unclaim(self, question_id: str) -> Question:
        """Lets this person's claim of a question go (an admin may end anyone's)."""
        path = f"/questions/{_core.path_segment(question_id)}/unclaim"
        return Question.from_json(self._call("POST", path, json={}))

    def grants(self, *, include_inactive: bool = False, limit: int | None = None, cursor: str | None = None) -> list[Grant]:
        """One page of the workspace's grants, newest first: the live ones, or with ``include_inactive`` the revoked
        and expired ones too."""
        params: dict[str, str] = {"all": "true"} if include_inactive else {}
        if limit is not None:
            params["limit"] = str(limit)
        if cursor is not None:
            params["cursor"] = cursor
        data = self._call("GET", "/grants", params=params)
        return [Grant.from_json(item) for item in data.get("items", ())]

    def revoke_grant(self, grant_id: str) -> Grant:
        """Ends a grant at once (its maker or an admin)."""
        return Grant.from_json(self._call("POST", f"/grants/{_core.path_segment(grant_id)}/revoke", json={}))

    def upload_file(
        self,
        data: bytes | str | os.PathLike[str],
        name: str | None = None,
        media_type: str | None = None,
    ) -> UploadedFile:
        """Uploads a file to answer a form's ``file`` field with (``responder`` and up; at most the server's limit,
        10 MiB by default, else ``TooLargeError``). ``data`` is a path (its name, and a media type guessed from it,
        unless given) or the bytes themselves (``name`` required). Answer with ``{"<key>": file.reference()}``;
        an upload no answer references is removed after a day."""
        content, params, headers = _core.upload_request(data, name, media_type)
        return UploadedFile.from_json(
            self._call("POST", "/files", content=content, params=params, content_headers=headers)
        )

    def download_file(self, file_id: str) -> bytes:
        """The bytes of an uploaded file: for whoever sees the question whose answer references it (the agent that
        asked included), or its uploader before an answer does."""
        data: bytes = self._call("GET", f"/files/{_core.path_segment(file_id)}", raw=True)
        return data

    def cancel(self, question_id: str, *, reason: str | None = None) -> Question:
        payload = {"reason": reason} if reason is not None else {}
        return Question.from_json(
            self._call("POST", f"/questions/{_core.path_segment(question_id)}/cancel", json=payload)
        )

    # Events ----------------------------------------------------------------------------------------------------

    def events(
        self, *, project: str | None = None, run_id: str | None = None, last_event_id: int | None = None
    ) -> Iterator[Event]:
        """Iterates the event stream for as long as the caller reads it.

        A dropped connection (network, a server restart, a proxy's idle timeout) is reopened with
        ``Last-Event-ID`` set to the last event received, and the server replays what was missed: no event is lost
        or repeated. ``last_event_id`` starts after a known event (``0``: from the beginning of the log); without
        it the stream starts with what happens from now on.
        """
        decoder = _core.SseDecoder(last_event_id)
        url = self.url + _core.API_PREFIX + "/events"
        params = _core.events_params(project, run_id)
        failures = 0
        while True:
            decoder = _core.SseDecoder(decoder.last_event_id)
            try:
                with self._http.stream(
                    "GET",
                    url,
                    params=params,
                    headers={**self._headers, **_core.events_headers(decoder.last_event_id)},
                    timeout=_core.http_timeout(_core.STREAM_READ_TIMEOUT),
                ) as response:
                    if response.status_code >= 400:
                        _core.raise_for_response(response, response.read())
                    failures = 0
                    for line in response.iter_lines():
                        event = decoder.feed(line)
                        if event is None:
                            continue
                        if event.type == _core.RECONNECT_EVENT:
                            break
                        yield event
            except (httpx.TransportError, ApiError) as error:
                if not self._retry.should_retry(failures, error, idempotent=True):
                    if isinstance(error, ApiError):
                        raise
                    raise _core.transport_error("GET", url, error) from error
                time.sleep(self._retry.delay(failures, error))
                failures += 1
            else:
                # The server ended the stream (it is stopping, or asked us to reconnect): a moment, then resume.
                time.sleep(self._retry.delay(0))

    # Plumbing --------------------------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        read_timeout: float | None = None,
        content: bytes | None = None,
        content_headers: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        url = self.url + _core.API_PREFIX + path
        headers = {**self._headers, **(content_headers or {})}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        idempotent = method == "GET" or idempotency_key is not None
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method,
                    url,
                    json=json,
                    content=content,
                    params=params,
                    headers=headers,
                    timeout=_core.http_timeout(read_timeout or self._timeout),
                )
                _core.raise_for_response(response, response.content)
                return response.content if raw else _core.decode_json(response.content)
            except (httpx.TransportError, ApiError) as error:
                if not self._retry.should_retry(attempt, error, idempotent=idempotent):
                    if isinstance(error, ApiError):
                        raise
                    raise _core.transport_error(method, url, error) from error
                time.sleep(self._retry.delay(attempt, error))
                attempt += 1
