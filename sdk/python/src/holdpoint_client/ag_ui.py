"""Holdpoint for AG-UI agents: a run that ends with an interrupt outcome has its interrupts answered by people in
Holdpoint, and the next run on the thread carries their answers as its ``resume`` entries.

The whole loop, against any agent served over AG-UI's HTTP transport (a POST of ``RunAgentInput``, answered with
an event stream)::

    from ag_ui.core import RunAgentInput, UserMessage
    from holdpoint_client import AsyncHoldpoint
    from holdpoint_client.ag_ui import HoldpointInterrupts, run_agent

    interrupts = HoldpointInterrupts(AsyncHoldpoint(url, token), project="deploys")
    run = await run_agent("http://127.0.0.1:8000/agent", input, interrupts, state_dir=".holdpoint/ag-ui")
    print(run.result)

How each interrupt (``RUN_FINISHED`` with ``outcome.type == "interrupt"``) becomes a question, by its ``reason``:

- ``tool_call``: an approval of that call (the tool's name and arguments, read from the run's tool call events or
  messages) through the workspace's approval rules (``POST /decide``), the approver allowed to edit the arguments
  unless the interrupt's ``responseSchema`` leaves ``editedArgs`` out. Its resume payload is ``{"approved": bool}``
  with ``"editedArgs"`` when the approver edited them.
- ``input_required`` (and any reason this module does not know, with a ``responseSchema``): a form whose fields are
  the schema's properties in their order, an ``integer`` a whole number and ``minimum``/``maximum`` its bounds;
  the payload is the answered object, an enum's value as the schema wrote it.
- A ``responseSchema`` of one typed value (an ``enum``, a ``oneOf`` of consts, a ``number`` or ``integer`` with its
  ``minimum``/``maximum``, a ``boolean``, an array of an enum): a question of that type; the payload is the value.
- ``confirmation``: a yes/no question; the payload is the boolean (or ``{name: bool}`` when the schema is an object
  with one boolean property).
- Anything else without a schema: a text question whose answer is the payload.

``message`` is the question's title (and body when long); ``expiresAt`` is its deadline, moved into the question
timeouts the server takes (``AsyncHoldpoint.timeout_bounds``): an answer that comes after ``expiresAt`` resumes the
interrupt as ``cancelled``. A question answered (or defaulted) resolves its interrupt; one that expired or was cancelled resolves it as ``cancelled``, without a
payload. Each resume entry's ``metadata["holdpoint"]`` says which question answered it, its outcome, who answered
and their comment.

Every question's ``Idempotency-Key`` is made of the thread id, the run id and the interrupt id, so asking again for
the same interrupt (a restarted process) finds the same question. ``run_agent`` with a ``state_dir`` writes the
interrupted run (its interrupts and the input the next run starts from) to disk before anybody is asked: started
again with the same thread id after a crash, it carries on with the same questions instead of running the agent
again, which AG-UI refuses while a thread has open interrupts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import httpx
from ag_ui.core import (
    AssistantMessage,
    Event,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import TypeAdapter

from . import _core
from ._async import AsyncHoldpoint
from ._types import (
    ApprovalResult,
    AskResult,
    Assignee,
    FormField,
    JsonObject,
    JsonValue,
    Option,
    Question,
    Urgency,
    parse_time,
)

STATE_VERSION = 1
METADATA_KEY = "holdpoint"
"""The key of a resume entry's ``metadata`` under which Holdpoint says how the interrupt was answered."""

_EVENT: TypeAdapter[Event] = TypeAdapter(Event)
_MAX_FIELDS = 30
"""The most fields a Holdpoint form takes: a schema of more properties is asked as JSON text."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call a run made, as an approval needs it: its name and parsed arguments."""

    name: str
    arguments: JsonObject


@dataclass
class Asked:
    """One interrupt and what was asked about it: a question, or the rules' decision when they decided a tool call
    without asking anyone (``question`` is then ``None``)."""

    interrupt: Interrupt
    question: Question | None = None
    decision: ApprovalResult | None = None
    schema: JsonObject | None = None
    """The schema the answer is shaped by, for reading the value back."""


class HoldpointInterrupts:
    """Asks Holdpoint about an AG-UI run's interrupts and turns the outcomes into its next run's ``resume`` entries.

    The arguments shape every question: ``project``, ``urgency``, ``timeout_seconds`` (a deadline for interrupts
    without ``expiresAt``; with one, the earlier of the two), ``assignee``; ``agent`` is the name the approval
    rules' ``agents`` globs match for ``tool_call`` interrupts (the token's name by default).
    """

    def __init__(
        self,
        client: AsyncHoldpoint,
        *,
        project: str | None = None,
        urgency: Urgency | None = None,
        timeout_seconds: float | None = None,
        assignee: Assignee | None = None,
        agent: str | None = None,
    ) -> None:
        self.client = client
        self.project = project
        self.urgency = urgency
        self.timeout_seconds = timeout_seconds
        self.assignee = assignee
        self.agent = agent

    async def ask(
        self,
        thread_id: str,
        run_id: str,
        interrupts: Sequence[Interrupt],
        *,
        tool_calls: Mapping[str, ToolCall] | None = None,
        asked_at: datetime | None = None,
    ) -> list[Asked]:
        """Asks about each interrupt (once per interrupt, however often it is called) without waiting.

        ``tool_calls`` maps the run's tool call ids to their calls (``tool_calls_of`` reads them from its events or
        messages), for the approvals of ``tool_call`` interrupts. An interrupt whose ``expiresAt`` has passed is
        not asked about: it is resumed as ``cancelled``.

        ``asked_at`` is when the interrupts were first asked about (default: now): each deadline is ``expiresAt``
        counted from it, so a process asking again after a restart, with the same ``asked_at``, sends the very
        request it sent before and the server answers with the question it made then (an ``Idempotency-Key`` used
        again with another request is refused).
        """
        calls = tool_calls or {}
        reference = asked_at or datetime.now(timezone.utc)
        return [await self._ask_one(thread_id, run_id, interrupt, calls, reference) for interrupt in interrupts]

    async def resume(
        self,
        thread_id: str,
        run_id: str,
        interrupts: Sequence[Interrupt],
        *,
        tool_calls: Mapping[str, ToolCall] | None = None,
        wait: bool = True,
        timeout: float | None = None,
        asked_at: datetime | None = None,
    ) -> list[ResumeEntry] | None:
        """Asks (see ``ask``), waits for every outcome, and returns the resume entries for the next run, one per
        interrupt in order; ``None`` while one is still pending (``wait=False``, or ``timeout`` ended the wait)."""
        asked = await self.ask(thread_id, run_id, interrupts, tool_calls=tool_calls, asked_at=asked_at)
        entries = []
        for item in asked:
            if item.question is not None and item.question.pending:
                if wait:
                    item.question = (await self.client.wait(item.question.id, timeout=timeout)).question
                else:
                    item.question = await self.client.get_question(item.question.id)
                if item.question.pending:
                    return None
            entries.append(resume_entry(item))
        return entries

    async def _ask_one(
        self, thread_id: str, run_id: str, interrupt: Interrupt, calls: Mapping[str, ToolCall], asked_at: datetime
    ) -> Asked:
        timeout = self._timeout(interrupt, asked_at)
        if timeout is not None and timeout <= 0:
            return Asked(interrupt)
        if timeout is not None and timeout != self.timeout_seconds:
            # A deadline counted from ``expiresAt`` may be sooner or later than the server takes: the question lives
            # within its bounds, and an answer after ``expiresAt`` is resumed as cancelled (see ``_too_late``).
            timeout = (await self.client.timeout_bounds()).clamp(timeout)
        key = idempotency_key(thread_id, run_id, interrupt.id)
        context: JsonObject = {"ag_ui": {"thread_id": thread_id, "run_id": run_id, "interrupt_id": interrupt.id}}
        schema = interrupt.response_schema
        title, body = _title_and_body(interrupt)
        if interrupt.reason == "tool_call":
            call = calls.get(interrupt.tool_call_id or "")
            tool_name = call.name if call else "tool"
            context["ag_ui"]["tool_call_id"] = interrupt.tool_call_id
            decided = await self.client.approve(
                tool_name,
                call.arguments if call else {},
                title=title if interrupt.message else None,
                body=body,
                allow_edit=_allows_edit(schema),
                context=context,
                project=self.project,
                urgency=self.urgency,
                timeout_seconds=timeout,
                assignee=self.assignee,
                agent=self.agent,
                idempotency_key=key,
                wait=False,
            )
            return Asked(interrupt, question=decided.question, decision=decided)
        if interrupt.reason == "confirmation":
            # Yes or no: the payload is the boolean, or {name: boolean} for a schema of one boolean property.
            asked = await self.client.ask(
                title, response_type="boolean", **self._common(body, context, timeout, key)
            )
            return Asked(interrupt, question=asked.question, schema=schema)
        properties = _form_properties(schema)
        if properties:
            required = set((schema or {}).get("required", ()))
            fields = [_field(name, prop, name in required) for name, prop in properties]
            asked = await self.client.ask(
                title, response_type="form", fields=fields, **self._common(body, context, timeout, key)
            )
            return Asked(interrupt, question=asked.question, schema=schema)
        scalar = _scalar_field(schema)
        if scalar is not None:
            # One value of a typed schema (an enum, a number, a boolean): asked as that type, not as free text.
            bounds = {name: bound for name, bound in (("min", scalar.min), ("max", scalar.max)) if bound is not None}
            asked = await self.client.ask(
                title,
                response_type=scalar.response_type,
                options=scalar.options or None,
                extra=bounds or None,
                **self._common(body, context, timeout, key),
            )
            return Asked(interrupt, question=asked.question, schema=schema)
        asked = await self.client.ask(title, response_type="text", **self._common(body, context, timeout, key))
        return Asked(interrupt, question=asked.question, schema=schema)

    def _common(self, body: str | None, context: JsonObject, timeout: float | None, key: str) -> dict[str, Any]:
        return {
            "kind": "blocking",
            "body": body,
            "context": context,
            "project": self.project,
            "urgency": self.urgency,
            "timeout_seconds": timeout,
            "assignee": self.assignee,
            "idempotency_key": key,
            "wait": False,
        }

    def _timeout(self, interrupt: Interrupt, asked_at: datetime) -> float | None:
        """Seconds from ``asked_at`` until the interrupt expires (whole seconds, rounded down so Holdpoint's deadline
        is not the later one), or the configured default; the earlier of the two. Zero once it has expired."""
        limits = [self.timeout_seconds] if self.timeout_seconds is not None else []
        expires = _expires(interrupt)
        if expires is not None:
            if datetime.now(timezone.utc) >= expires:
                return 0
            limits.append(math.floor((expires - asked_at).total_seconds()))
        return min(limits) if limits else None


def resume_entry(asked: Asked) -> ResumeEntry:
    """The resume entry for an interrupt whose question (or rules' decision) is settled: ``resolved`` with its
    payload when answered or defaulted, ``cancelled`` when it expired, was cancelled, or expired before asking."""
    interrupt = asked.interrupt
    question = asked.question
    if question is None and asked.decision is None:
        return ResumeEntry(
            interrupt_id=interrupt.id, status="cancelled", metadata={METADATA_KEY: {"outcome": "expired"}}
        )
    if interrupt.reason == "tool_call":
        result = asked.decision.waited(question) if asked.decision and question else asked.decision
        assert result is not None
        meta: JsonObject = {"outcome": result.outcome, "question_id": result.question_id}
        if result.outcome in ("expired", "cancelled") or (question is not None and _too_late(interrupt, question)):
            return ResumeEntry(interrupt_id=interrupt.id, status="cancelled", metadata={METADATA_KEY: meta})
        payload: JsonObject = {"approved": result.approved}
        if result.approved and result.edited_arguments is not None:
            payload["editedArgs"] = result.edited_arguments
        if result.answered_by:
            meta["answered_by"] = result.answered_by
        if result.comment or result.rule_reason:
            meta["comment"] = result.comment or result.rule_reason
        if result.rule:
            meta["rule"] = result.rule
        return ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=payload, metadata={METADATA_KEY: meta})
    assert question is not None
    outcome = AskResult(question)
    meta = {"outcome": outcome.outcome, "question_id": question.id}
    if outcome.outcome not in ("answered", "defaulted") or _too_late(interrupt, question):
        return ResumeEntry(interrupt_id=interrupt.id, status="cancelled", metadata={METADATA_KEY: meta})
    if outcome.answered_by:
        meta["answered_by"] = outcome.answered_by
    if outcome.comment:
        meta["comment"] = outcome.comment
    return ResumeEntry(
        interrupt_id=interrupt.id,
        status="resolved",
        payload=_payload(interrupt, asked.schema, question, outcome.value),
        metadata={METADATA_KEY: meta},
    )


def _expires(interrupt: Interrupt) -> datetime | None:
    if not interrupt.expires_at:
        return None
    try:
        return parse_time(interrupt.expires_at)
    except ValueError:
        return None


def _too_late(interrupt: Interrupt, question: Question) -> bool:
    """Whether the question was settled after the interrupt expired: the agent would refuse that answer as stale
    (it can happen only when the question was first asked after a restart, with a deadline counted from before)."""
    expires = _expires(interrupt)
    return expires is not None and question.resolved_at is not None and question.resolved_at > expires


def idempotency_key(thread_id: str, run_id: str, interrupt_id: str) -> str:
    """The key a question about one interrupt is asked under: the same interrupt always finds the same question."""
    key = f"ag-ui:{thread_id}:{run_id}:{interrupt_id}"
    return key if len(key) <= 200 else "ag-ui:" + hashlib.sha256(key.encode()).hexdigest()


def tool_calls_of(events: Sequence[Any] = (), messages: Sequence[Any] = ()) -> dict[str, ToolCall]:
    """The tool calls of a run by id, from its ``TOOL_CALL_START``/``TOOL_CALL_ARGS`` events and from assistant
    messages (a ``MESSAGES_SNAPSHOT``, or the thread's messages)."""
    calls: dict[str, ToolCall] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                calls[call.id] = ToolCall(call.function.name, _parse_arguments(call.function.arguments))
    names: dict[str, str] = {}
    arguments: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, MessagesSnapshotEvent):
            calls.update(tool_calls_of(messages=event.messages))
        elif isinstance(event, ToolCallStartEvent):
            names[event.tool_call_id] = event.tool_call_name
            arguments.setdefault(event.tool_call_id, [])
        elif isinstance(event, ToolCallArgsEvent):
            arguments.setdefault(event.tool_call_id, []).append(event.delta)
    for call_id, name in names.items():
        calls.setdefault(call_id, ToolCall(name, _parse_arguments("".join(arguments.get(call_id, [])))))
    return calls


# Running an agent over HTTP ----------------------------------------------------------------------------------------


class AgUiRunError(RuntimeError):
    """The agent ended a run with ``RUN_ERROR`` (or the stream ended without ``RUN_FINISHED``)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class AgUiRun:
    """The run that finished the thread's work: its events, its ``RUN_FINISHED`` event and that event's
    ``result``; ``resumed`` lists the resume entries each interrupted run before it was continued with."""

    events: list[Any]
    finished: RunFinishedEvent
    resumed: list[list[ResumeEntry]] = field(default_factory=list)

    @property
    def result(self) -> Any:
        return self.finished.result


async def stream_run(
    url: str, input: RunAgentInput, *, headers: Mapping[str, str] | None = None, http: httpx.AsyncClient | None = None
) -> AsyncIterator[Any]:
    """One run of an agent served over AG-UI's HTTP transport: POSTs ``input`` and yields its events as
    ``ag_ui.core`` models."""
    owned = http is None
    client = http or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
    try:
        async with client.stream(
            "POST",
            url,
            content=input.model_dump_json(by_alias=True),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream", **(headers or {})},
        ) as response:
            if response.status_code >= 400:
                body = (await response.aread()).decode(errors="replace")
                raise AgUiRunError(f"the agent answered {response.status_code}: {body[:500]}")
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    yield _EVENT.validate_json("\n".join(data))
                    data = []
            if data:
                yield _EVENT.validate_json("\n".join(data))
    finally:
        if owned:
            await client.aclose()


async def run_agent(
    url: str,
    input: RunAgentInput,
    interrupts: HoldpointInterrupts,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    headers: Mapping[str, str] | None = None,
    http: httpx.AsyncClient | None = None,
    wait_timeout: float | None = None,
) -> AgUiRun:
    """Runs the agent at ``url`` until a run finishes without interrupts, answering every interrupt outcome through
    Holdpoint on the way; returns that last run.

    Each continued run has a new run id, the same thread, the interrupted run's messages (see
    :func:`messages_after`), the state of its last ``STATE_SNAPSHOT`` (else that it was started with) and the
    resume entries. With a
    ``state_dir`` the interrupted run is saved before anybody is asked, and a thread found there (the process
    stopped while people decided) is continued from it rather than run again with ``input``.
    """
    store = _Store(Path(state_dir)) if state_dir is not None else None
    resumed: list[list[ResumeEntry]] = []
    saved = store.read(input.thread_id) if store else None
    if saved is not None:
        next_input, entries = await _answer(interrupts, saved, wait_timeout)
    else:
        next_input, entries = input, None
    while True:
        if entries is not None:
            resumed.append(entries)
            next_input = next_input.model_copy(update={"run_id": str(uuid.uuid4()), "resume": entries})
        events = [event async for event in stream_run(url, next_input, headers=headers, http=http)]
        finished = _finished(events)
        if not isinstance(finished.outcome, RunFinishedInterruptOutcome):
            if store:
                store.forget(input.thread_id)
            return AgUiRun(events=events, finished=finished, resumed=resumed)
        continued = _continued(next_input, events)
        saved = _Saved(
            thread_id=finished.thread_id,
            run_id=finished.run_id,
            interrupts=list(finished.outcome.interrupts),
            tool_calls=tool_calls_of(events, continued.messages),
            next_input=continued,
            asked_at=datetime.now(timezone.utc),
        )
        if store:
            store.write(saved)
        next_input, entries = await _answer(interrupts, saved, wait_timeout)


@dataclass
class _Saved:
    thread_id: str
    run_id: str
    interrupts: list[Interrupt]
    tool_calls: dict[str, ToolCall]
    next_input: RunAgentInput
    """The input the next run starts from, before its run id and resume entries are set."""
    asked_at: datetime
    """When the interrupts were first asked about: the deadlines are counted from it, also after a restart."""


async def _answer(
    interrupts: HoldpointInterrupts, saved: _Saved, wait_timeout: float | None
) -> tuple[RunAgentInput, list[ResumeEntry]]:
    entries = await interrupts.resume(
        saved.thread_id,
        saved.run_id,
        saved.interrupts,
        tool_calls=saved.tool_calls,
        timeout=wait_timeout,
        asked_at=saved.asked_at,
    )
    if entries is None:
        raise TimeoutError(f"the interrupts of run {saved.run_id} were not all decided within {wait_timeout} s")
    return saved.next_input, entries


def _finished(events: Sequence[Any]) -> RunFinishedEvent:
    for event in events:
        if isinstance(event, RunErrorEvent):
            raise AgUiRunError(event.message, event.code)
    for event in reversed(events):
        if isinstance(event, RunFinishedEvent):
            return event
    raise AgUiRunError("the agent's event stream ended without RUN_FINISHED")


def _continued(previous: RunAgentInput, events: Sequence[Any]) -> RunAgentInput:
    update: dict[str, Any] = {"resume": None, "messages": messages_after(previous.messages, events)}
    for event in events:
        if isinstance(event, StateSnapshotEvent):
            update["state"] = event.snapshot
    return previous.model_copy(update=update)


_MESSAGES = TypeAdapter(list[Message])


def messages_after(messages: Sequence[Message], events: Sequence[Any]) -> list[Message]:
    """The thread's messages once a run's events are applied to ``messages``, as AG-UI's own client applies its
    messages (reasoning messages aside): a ``MESSAGES_SNAPSHOT`` replaces them; streamed text (``TEXT_MESSAGE_*``, or
    its ``CHUNK`` shorthand) adds a message of the role it starts with, or adds to the text message it names; a tool
    call (``TOOL_CALL_*``, or its ``CHUNK``) joins the assistant message it names as parent, else an assistant
    message of its own; ``TOOL_CALL_RESULT`` adds a tool message after the message with its call (and the results
    already there). So an agent that streams its turn without a snapshot has its own messages, and the call an
    interrupt is about, in the next run's input."""
    thread = _dumped(messages)

    def message(message_id: str) -> dict[str, Any] | None:
        return next((m for m in reversed(thread) if m.get("id") == message_id), None)

    calls = _calls_in(thread)
    text_id: str | None = None
    call_id: str | None = None

    def start_text(message_id: str, role: str | None) -> None:
        if message(message_id) is None:
            thread.append({"id": message_id, "role": role or "assistant", "content": ""})

    def add_text(message_id: str | None, delta: str | None) -> None:
        found = message(message_id) if message_id is not None else None
        # Text goes only to a message whose content is text (not an activity, nor content in parts).
        if found is not None and delta and found.get("role") != "activity":
            content = found.get("content")
            found["content"] = (content if isinstance(content, str) else "") + delta

    def start_call(tool_call_id: str, name: str, parent: str | None) -> None:
        if tool_call_id in calls:
            calls[tool_call_id]["function"]["name"] = name or calls[tool_call_id]["function"]["name"]
            return
        owner = message(parent) if parent is not None else None
        if owner is None or owner.get("role") != "assistant":
            # A parent that is another kind of message keeps its id; the call's own message takes the call's.
            owner = {"id": tool_call_id if owner is not None else (parent or tool_call_id), "role": "assistant"}
            thread.append(owner)
        call = {"id": tool_call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        owner.setdefault("toolCalls", []).append(call)
        calls[tool_call_id] = call

    def add_arguments(tool_call_id: str | None, delta: str | None) -> None:
        call = calls.get(tool_call_id) if tool_call_id is not None else None
        if call is not None and delta:
            call["function"]["arguments"] += delta

    for event in events:
        if isinstance(event, MessagesSnapshotEvent):
            thread = _dumped(event.messages)
            calls = _calls_in(thread)
        elif isinstance(event, TextMessageStartEvent):
            start_text(event.message_id, event.role)
            text_id = event.message_id
        elif isinstance(event, TextMessageContentEvent):
            add_text(event.message_id, event.delta)
        elif isinstance(event, TextMessageChunkEvent):
            if event.message_id is not None and event.message_id != text_id:
                start_text(event.message_id, event.role)
                text_id = event.message_id
            add_text(text_id, event.delta)
        elif isinstance(event, ToolCallStartEvent):
            start_call(event.tool_call_id, event.tool_call_name, event.parent_message_id)
            call_id = event.tool_call_id
        elif isinstance(event, ToolCallArgsEvent):
            add_arguments(event.tool_call_id, event.delta)
        elif isinstance(event, ToolCallChunkEvent):
            if event.tool_call_id is not None and event.tool_call_id != call_id:
                start_call(event.tool_call_id, event.tool_call_name or "", event.parent_message_id)
                call_id = event.tool_call_id
            add_arguments(call_id, event.delta)
        elif isinstance(event, ToolCallResultEvent) and message(event.message_id) is None:
            content = event.content if isinstance(event.content, str) else [
                part.model_dump(by_alias=True, exclude_none=True) for part in event.content
            ]
            result = {"id": event.message_id, "role": "tool", "toolCallId": event.tool_call_id, "content": content}
            thread.insert(_result_position(thread, event.tool_call_id), result)
    return _MESSAGES.validate_python(thread)


def _dumped(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as their wire JSON, to be changed in place."""
    return [m.model_dump(by_alias=True, exclude_none=True) for m in messages]


def _calls_in(thread: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The tool calls of a thread's assistant messages, by id: the same objects, so arguments added to one land
    in its message."""
    return {call["id"]: call for m in thread for call in m.get("toolCalls") or () if isinstance(call, dict)}


def _result_position(thread: list[dict[str, Any]], tool_call_id: str) -> int:
    """Where a tool's result goes: after the assistant message with its call and the tool messages that follow
    it, else at the end."""
    for index, candidate in enumerate(thread):
        if any(isinstance(c, dict) and c.get("id") == tool_call_id for c in candidate.get("toolCalls") or ()):
            position = index + 1
            while position < len(thread) and thread[position].get("role") == "tool":
                position += 1
            return position
    return len(thread)


class _Store:
    """One JSON file per thread: the interrupted run, written before anybody is asked."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, thread_id: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", thread_id).strip(".") or "thread"
        if safe != thread_id:
            safe = f"{safe[:80]}-{hashlib.sha256(thread_id.encode()).hexdigest()[:12]}"
        return self.directory / f"{safe}.json"

    def write(self, saved: _Saved) -> None:
        data = {
            "version": STATE_VERSION,
            "thread_id": saved.thread_id,
            "run_id": saved.run_id,
            "interrupts": [i.model_dump(mode="json", by_alias=True) for i in saved.interrupts],
            "tool_calls": {k: {"name": c.name, "arguments": c.arguments} for k, c in saved.tool_calls.items()},
            "next_input": saved.next_input.model_dump(mode="json", by_alias=True),
            "asked_at": saved.asked_at.isoformat(),
        }
        path = self._path(saved.thread_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        with open(partial, "w", encoding="utf-8") as file:
            json.dump(data, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)

    def read(self, thread_id: str) -> _Saved | None:
        path = self._path(thread_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"{path} was written by another version of holdpoint_client.ag_ui")
        return _Saved(
            thread_id=data["thread_id"],
            run_id=data["run_id"],
            interrupts=[Interrupt.model_validate(i) for i in data["interrupts"]],
            tool_calls={k: ToolCall(c["name"], c["arguments"]) for k, c in data["tool_calls"].items()},
            next_input=RunAgentInput.model_validate(data["next_input"]),
            asked_at=parse_time(data["asked_at"]),
        )

    def forget(self, thread_id: str) -> None:
        self._path(thread_id).unlink(missing_ok=True)


# Schemas to questions and answers to payloads ----------------------------------------------------------------------


def _title_and_body(interrupt: Interrupt) -> tuple[str, str | None]:
    message = (interrupt.message or "").strip()
    if not message:
        titles = {
            "tool_call": "Allow this tool call?",
            "confirmation": "Confirm?",
            "input_required": "The agent needs input",
        }
        return titles.get(interrupt.reason, f"The agent asks ({interrupt.reason})"), None
    first = message.splitlines()[0]
    if len(first) <= 300 and first == message:
        return first, None
    return (first if len(first) <= 300 else first[:299] + "…"), _core.clip_body(message)


def _allows_edit(schema: JsonObject | None) -> bool:
    """Edits are offered unless a response schema is given and leaves ``editedArgs`` out (AG-UI's capability
    signal for approve-with-edits)."""
    if not schema:
        return True
    properties = schema.get("properties")
    return isinstance(properties, dict) and "editedArgs" in properties


def _form_properties(schema: JsonObject | None, *, boolean_only: bool = False) -> list[tuple[str, JsonObject]]:
    """The properties of an object schema, in order, when it has 1..=30 of them; with ``boolean_only`` only a
    schema of exactly one boolean property counts."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return []
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not 1 <= len(properties) <= _MAX_FIELDS:
        return []
    items = [(str(k), v if isinstance(v, dict) else {}) for k, v in properties.items()]
    if boolean_only:
        return items if len(items) == 1 and items[0][1].get("type") == "boolean" else []
    return items


def _options(values: Sequence[JsonValue], titles: Sequence[str] | None = None) -> list[Option | str]:
    return [Option(value=str(v), label=titles[i] if titles else str(v)) for i, v in enumerate(values)]


def _field(name: str, prop: JsonObject, required: bool) -> FormField:
    label = str(prop.get("title") or prop.get("description") or name)[:200]
    kind = prop.get("type")
    if isinstance(prop.get("enum"), list) and len(prop["enum"]) >= 2:
        options = _options(prop["enum"])
        return FormField(key=name, label=label, response_type="choice", options=options, required=required)
    one_of = prop.get("oneOf")
    if isinstance(one_of, list) and len(one_of) >= 2 and all(isinstance(o, dict) and "const" in o for o in one_of):
        values = [o["const"] for o in one_of]
        titles = [str(o.get("title") or o["const"]) for o in one_of]
        options = _options(values, titles)
        return FormField(key=name, label=label, response_type="choice", options=options, required=required)
    items = prop.get("items")
    if kind == "array" and isinstance(items, dict) and isinstance(items.get("enum"), list) and len(items["enum"]) >= 2:
        return FormField(
            key=name, label=label, response_type="multi_choice", options=_options(items["enum"]), required=required
        )
    if kind == "boolean":
        return FormField(key=name, label=label, response_type="boolean", required=required)
    if kind in ("number", "integer"):
        low, high = _bound(prop.get("minimum")), _bound(prop.get("maximum"))
        if kind == "integer":
            return FormField(key=name, label=label, response_type="integer", required=required, min=low, max=high)
        return FormField(key=name, label=label, response_type="number", required=required, min=low, max=high)
    if kind not in (None, "string"):
        # Objects and other arrays are answered as JSON text and parsed back.
        return FormField(key=name, label=f"{label} (JSON)", response_type="text", required=required)
    return FormField(key=name, label=label, response_type="text", required=required)


def _scalar_field(schema: JsonObject | None) -> FormField | None:
    """The one typed value a schema that is no object asks for (an ``enum``, a ``oneOf`` of consts, a number, an
    integer, a boolean, an array of an enum), as a field; ``None`` for text and for what is asked as JSON text."""
    if not isinstance(schema, dict) or schema.get("type", "object" if "properties" in schema else None) == "object":
        return None
    field = _field("value", schema, True)
    return field if field.response_type != "text" else None


def _bound(value: JsonValue) -> float | None:
    """A schema's ``minimum`` or ``maximum`` as a field's bound; anything but a number is none."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _payload(interrupt: Interrupt, schema: JsonObject | None, question: Question, value: JsonValue) -> JsonValue:
    if question.response_type == "boolean":
        only = _form_properties(schema, boolean_only=True)
        return {only[0][0]: value} if only else value
    if question.response_type == "form" and isinstance(value, dict):
        properties = dict(_form_properties(schema))
        return {key: _typed(properties.get(key, {}), item) for key, item in value.items()}
    if schema is not None and _scalar_field(schema) is not None:
        return _typed(schema, value)
    return value


def _choices(prop: JsonObject) -> list[JsonValue]:
    """The values a property's ``enum`` or ``oneOf`` of consts offers, as the schema wrote them."""
    enum = prop.get("enum")
    if isinstance(enum, list):
        return enum
    one_of = prop.get("oneOf")
    return [o["const"] for o in one_of if isinstance(o, dict) and "const" in o] if isinstance(one_of, list) else []


def _as_written(choices: list[JsonValue], value: JsonValue) -> JsonValue:
    """``value``, answered as the text of a choice, as the choice itself."""
    return next((c for c in choices if not isinstance(c, str) and str(c) == value), value)


def _typed(prop: JsonObject, value: JsonValue) -> JsonValue:
    """A form value as the schema's type wants it: an integer for ``integer``, a choice of an enum of numbers or
    booleans as that value, parsed JSON for objects and arrays that were answered as text."""
    kind = prop.get("type")
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    # A choice is answered with its value as text: an enum of numbers or booleans gets its own values back.
    items = prop.get("items")
    item_choices = _choices(items) if kind == "array" and isinstance(items, dict) else []
    if item_choices and isinstance(value, list):
        return [_as_written(item_choices, item) for item in value]
    choices = _choices(prop)
    if choices and isinstance(value, str):
        return _as_written(choices, value)
    if kind in ("object", "array") and isinstance(value, str):
        try:
            return cast(JsonValue, json.loads(value))
        except ValueError:
            return value
    return value


def _parse_arguments(raw: str) -> JsonObject:
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"arguments": raw}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


__all__ = [
    "METADATA_KEY",
    "AgUiRun",
    "AgUiRunError",
    "Asked",
    "HoldpointInterrupts",
    "ToolCall",
    "idempotency_key",
    "resume_entry",
    "run_agent",
    "stream_run",
    "tool_calls_of",
]
