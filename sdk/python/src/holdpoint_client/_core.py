"""What the sync and the async client share: configuration, request bodies, the retry policy and the SSE decoder.

Only the I/O differs between the two clients; every decision (what to send, what to retry, how long to wait, how
to read the stream) is made here once.
"""

from __future__ import annotations

import json
import mimetypes
import os
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import httpx

from ._errors import (
    ApiError,
    HoldpointError,
    RateLimitedError,
    TransportError,
    error_from_response,
    retry_after_seconds,
)
from ._types import (
    Action,
    Assignee,
    Event,
    FormField,
    JsonObject,
    JsonValue,
    Option,
    Page,
    Question,
    QuestionKind,
    Response,
    ResponseType,
    Urgency,
)

__version__ = "0.1.0"

API_PREFIX = "/api/v1"
DEFAULT_URL = "http://127.0.0.1:3000"
MAX_WAIT_SECONDS = 60
"""The longest one long-poll of ``/questions/{id}/wait`` may hold a request (the server's bound)."""

STREAM_READ_TIMEOUT = 45.0
"""The server sends a keep-alive comment every 10 s: a stream silent for this long is dead and is reopened."""


def resolve_url_and_token(url: str | None, token: str | None) -> tuple[str, str]:
    """The server and token as given, else from ``HOLDPOINT_SERVER`` and ``HOLDPOINT_TOKEN`` (as the CLI reads them)."""
    base = (url or os.environ.get("HOLDPOINT_SERVER") or DEFAULT_URL).rstrip("/")
    if base.endswith(API_PREFIX):
        base = base[: -len(API_PREFIX)]
    secret = token or os.environ.get("HOLDPOINT_TOKEN")
    if not secret:
        raise HoldpointError("no token: pass token=... or set HOLDPOINT_TOKEN")
    return base, secret


def default_headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json",
        "User-Agent": f"holdpoint-python/{__version__}",
    }


def path_segment(value: str) -> str:
    return quote(str(value), safe="")


def upload_request(
    data: bytes | str | os.PathLike[str], name: str | None, media_type: str | None
) -> tuple[bytes, dict[str, str], dict[str, str]]:
    """The body, query and headers of ``POST /files`` for ``data``: a file's path (read whole; its name and a media
    type guessed from it unless given) or its bytes (``name`` then required)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        content = bytes(data)
        if not name:
            raise HoldpointError("uploading bytes needs a name: upload_file(data, name=...)")
    else:
        path = os.fspath(data)
        with open(path, "rb") as file:
            content = file.read()
        name = name or os.path.basename(path)
        if media_type is None:
            media_type = mimetypes.guess_type(path)[0]
    headers = {"Content-Type": media_type or "application/octet-stream"}
    return content, {"name": name}, headers


@dataclass(frozen=True)
class TimeoutBounds:
    """The question timeouts a server takes, in seconds (its ``HOLDPOINT_MIN_TIMEOUT_SECONDS`` and
    ``HOLDPOINT_MAX_TIMEOUT_SECONDS``)."""

    min_seconds: int
    max_seconds: int

    def clamp(self, seconds: float) -> float:
        """``seconds`` moved into the bounds."""
        return max(float(self.min_seconds), min(float(self.max_seconds), seconds))


def timeout_bounds(document: Any) -> TimeoutBounds:
    """The bounds a server's OpenAPI document gives a new question's ``timeout_seconds``."""
    try:
        schema = document["components"]["schemas"]["NewQuestion"]
        # The schema is an ``allOf`` of its parts (a flattened part): the property is in one of them.
        for part in [schema, *schema.get("allOf", [])]:
            timeout = part.get("properties", {}).get("timeout_seconds")
            if timeout is not None:
                return TimeoutBounds(int(timeout["minimum"]), int(timeout["maximum"]))
        raise KeyError("timeout_seconds")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"the server's OpenAPI document gives no timeout bounds: {error!r}") from error


def new_idempotency_key() -> str:
    return f"hp-py-{uuid.uuid4()}"


def question_body(
    title: str,
    *,
    kind: QuestionKind | None,
    response_type: ResponseType | None,
    body: str | None,
    options: Sequence[Option | str] | None,
    fields: Sequence[FormField] | None,
    action: Action | None,
    allow_edit: bool,
    context: Mapping[str, JsonValue] | None,
    project: str | None,
    run_id: str | None,
    urgency: Urgency | None,
    timeout_seconds: float | timedelta | None,
    default_response: Response | JsonValue,
    assignee: Assignee | None,
    callback_url: str | None,
    extra: Mapping[str, JsonValue] | None,
    required_approvals: int | None = None,
    eligible: Mapping[str, JsonValue] | None = None,
    response_schema: Mapping[str, JsonValue] | None = None,
) -> JsonObject:
    """The JSON of ``POST /questions``; what is left ``None`` is left to the server's defaults.

    ``response_schema`` (a JSON Schema of MCP elicitation's primitives) is asked instead of ``fields``.
    """
    payload: JsonObject = {"title": title}
    if kind is not None:
        payload["kind"] = kind
    if response_type is not None:
        payload["response_type"] = response_type
    if body:
        payload["body"] = body
    if options:
        payload["options"] = [Option.of(o).to_json() for o in options]
    if fields:
        payload["fields"] = [f.to_json() for f in fields]
    if response_schema is not None:
        payload["response_schema"] = dict(response_schema)
    if action is not None:
        payload["action"] = action.to_json()
    if allow_edit:
        payload["allow_edit"] = True
    if context is not None:
        payload["context"] = dict(context)
    if project is not None:
        payload["project"] = project
    if run_id is not None:
        payload["run_id"] = str(run_id)
    if urgency is not None:
        payload["urgency"] = urgency
    if timeout_seconds is not None:
        seconds = timeout_seconds.total_seconds() if isinstance(timeout_seconds, timedelta) else timeout_seconds
        payload["timeout_seconds"] = int(round(seconds))
    if default_response is not None:
        default = default_response if isinstance(default_response, Response) else Response(value=default_response)
        payload["default_response"] = default.to_json()
    if assignee is not None:
        payload["assignee"] = assignee.to_json()
    if callback_url is not None:
        payload["callback_url"] = callback_url
    if required_approvals is not None:
        payload["required_approvals"] = required_approvals
    if eligible is not None:
        payload["eligible"] = dict(eligible)
    if extra:
        payload.update(extra)
    return payload


def decide_body(
    tool_name: str,
    arguments: Mapping[str, JsonValue] | None,
    *,
    agent: str | None,
    run_id: str | None,
    wait: bool,
    title: str | None,
    body: str | None,
    allow_edit: bool,
    context: Mapping[str, JsonValue] | None,
    project: str | None,
    urgency: Urgency | None,
    timeout_seconds: float | timedelta | None,
    default: bool | None,
    assignee: Assignee | None,
    callback_url: str | None,
    required_approvals: int | None,
    eligible: Mapping[str, JsonValue] | None,
) -> JsonObject:
    """The JSON of ``POST /decide``: the call, and how to ask about it should the rules say ``ask`` (a rule's own
    ``ask`` settings win over these)."""
    wishes = question_body(
        title or approval_title(tool_name),
        kind=None,
        response_type=None,
        body=body,
        options=None,
        fields=None,
        action=None,
        allow_edit=allow_edit,
        context=context,
        project=project,
        run_id=None,
        urgency=urgency,
        timeout_seconds=timeout_seconds,
        default_response=None if default is None else Response(value=default),
        assignee=assignee,
        callback_url=callback_url,
        extra=None,
        required_approvals=required_approvals,
        eligible=eligible,
    )
    payload: JsonObject = {"tool": tool_name, "arguments": dict(arguments or {}), "wait": wait, "question": wishes}
    if agent is not None:
        payload["agent"] = agent
    if run_id is not None:
        payload["run_id"] = str(run_id)
    return payload


def decide_waits(wait: bool, limit: float | None) -> bool:
    """Whether ``POST /decide`` itself should hold for a person: only when the caller would wait at least as long as
    the server holds one request, so a shorter limit is kept to the second by ``/questions/{id}/wait``."""
    return wait and (limit is None or limit >= MAX_WAIT_SECONDS)


MAX_BODY_BYTES = 32 * 1024
"""The longest question body the server takes, in UTF-8 bytes."""


def clip_body(text: str) -> str:
    """A message as a question's body: cut to what the server takes (on a character boundary) and marked as cut."""
    encoded = text.encode("utf-8")
    if len(encoded) <= MAX_BODY_BYTES:
        return text
    return encoded[: MAX_BODY_BYTES - 8].decode("utf-8", errors="ignore") + "\n\n[…]"


def approval_title(tool_name: str) -> str:
    title = f"Allow {tool_name}?"
    return title if len(title) <= 300 else title[:299] + "…"


def answer_body(
    value: JsonValue,
    comment: str | None,
    edited_arguments: Mapping[str, JsonValue] | None,
    grant: Mapping[str, JsonValue] | None = None,
) -> JsonObject:
    body = Response(
        value=value, comment=comment, edited_arguments=dict(edited_arguments) if edited_arguments else None
    ).to_json()
    if grant is not None:
        body["grant"] = dict(grant)
    return body


def list_params(
    *,
    status: str | None,
    kind: str | None,
    project: str | None,
    urgency: str | None,
    run_id: str | None,
    q: str | None,
    sort: str | None,
    limit: int | None,
    cursor: str | None,
) -> dict[str, str]:
    given = {
        "status": status,
        "kind": kind,
        "project": project,
        "urgency": urgency,
        "run_id": run_id,
        "q": q,
        "sort": sort,
        "limit": None if limit is None else str(limit),
        "cursor": cursor,
    }
    return {name: value for name, value in given.items() if value is not None}


def page_from_json(data: Any) -> Page:
    return Page(
        items=tuple(Question.from_json(item) for item in data.get("items", ())),
        next_cursor=data.get("next_cursor"),
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How calls are retried: up to ``max_retries`` more attempts, ``backoff`` seconds doubling up to
    ``max_backoff`` (with jitter), or what the server's ``Retry-After`` says.

    A request is retried only when that cannot do something twice: always when it never reached the server (the
    connection was refused) or the server refused it before doing anything (429, 503); after it was sent, only
    reads and creations with an ``Idempotency-Key`` (a repeated key returns the first result).
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, error: BaseException | None = None) -> float:
        if isinstance(error, ApiError):
            asked = retry_after_seconds(error.headers)
            if asked is not None:
                return min(asked, 60.0)
        base: float = min(self.max_backoff, self.backoff * 2.0**attempt)
        return base * (0.5 + random.random() / 2)

    def should_retry(self, attempt: int, error: BaseException, *, idempotent: bool) -> bool:
        if attempt >= self.max_retries:
            return False
        if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
            return True
        if isinstance(error, RateLimitedError) or (isinstance(error, ApiError) and error.status == 503):
            return True
        if not idempotent:
            return False
        if isinstance(error, ApiError):
            return error.status in (502, 504)
        return isinstance(error, httpx.TransportError)


def raise_for_response(response: httpx.Response, body: bytes) -> None:
    if response.status_code >= 400:
        raise error_from_response(response.status_code, body, response.headers)


def decode_json(body: bytes) -> Any:
    return json.loads(body) if body.strip() else None


def transport_error(method: str, url: str, error: BaseException) -> TransportError:
    return TransportError(f"{method} {url}: {type(error).__name__}: {error}")


class SseDecoder:
    """Turns the lines of a ``text/event-stream`` into events (the WHATWG rules, for what the server sends).

    ``last_event_id`` follows every ``id:`` line, so a reconnect resumes after the last event this decoder saw.
    """

    def __init__(self, last_event_id: int | None = None) -> None:
        self.last_event_id = last_event_id
        self._type = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> Event | None:
        """One line, without its line ending; returns an event when a blank line completes one."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._type = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        event_type, data, event_id = self._type or "message", "\n".join(self._data), self._id
        self._type, self._data, self._id = "", [], None
        if event_id is not None and event_id.strip().isdigit():
            self.last_event_id = int(event_id)
        # No data, no event (WHATWG): an `id:` alone only moves the position a reconnect resumes from.
        if not data:
            return None
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"text": data}
        if not isinstance(parsed, dict):
            parsed = {"value": parsed}
        return Event(id=self.last_event_id if self.last_event_id is not None else -1, type=event_type, data=parsed)


RECONNECT_EVENT = "reconnect"
"""Sent by the server before it ends a stream on purpose (shutting down, or the client fell behind): reconnect."""


def events_params(project: str | None, run_id: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if project is not None:
        params["project"] = project
    if run_id is not None:
        params["run_id"] = str(run_id)
    return params


def events_headers(last_event_id: int | None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    return headers


def wait_slice(remaining: float | None) -> int:
    """How long the next long-poll holds: the server's maximum, or what is left of the caller's limit."""
    if remaining is None:
        return MAX_WAIT_SECONDS
    return max(1, min(MAX_WAIT_SECONDS, int(remaining + 0.999)))


def http_timeout(read: float) -> httpx.Timeout:
    return httpx.Timeout(connect=10.0, read=read, write=30.0, pool=30.0)
