"""Holdpoint for A2A: watch a remote agent's task, and when it needs input (``input-required``, or
``auth-required``), ask a person in Holdpoint and send their answer back on the same task and context.

The whole loop, with the ``a2a-sdk`` client::

    from a2a.client import ClientConfig, create_client
    from a2a.helpers import new_text_message
    from a2a.types import Role
    from holdpoint_client import AsyncHoldpoint
    from holdpoint_client.a2a import TaskWatcher

    agent = await create_client("http://127.0.0.1:9999", ClientConfig(streaming=True))
    watcher = TaskWatcher(agent, AsyncHoldpoint(url, token), project="deploys")
    task = await watcher.send(new_text_message("Deploy the api service", role=Role.ROLE_USER))
    print(task.status.state, task.artifacts)

``send`` starts a task with a message; ``watch(task_id)`` follows one that already runs, e.g. after the watching
process was restarted: the task lives with the agent, and the watcher re-attaches by its id. Each time the task
stops for input, the agent's status message (its text parts, and any data parts as JSON) becomes one text question
(title: its first line; context: the task, the context and the state); the question's ``Idempotency-Key`` is the
task id and the status message's id, so a watcher that re-attaches finds the question already asked. An answer (or
a default) goes back as a user message with the task's ``task_id`` and ``context_id``. A question that expired or
was cancelled cancels the task (A2A has no "nobody answered" reply): ``watch`` returns it ``canceled``.

The task may go on without the answer while the person decides: an agent given a credential out of band leaves
``auth-required`` by itself, and any agent may end or cancel its task. The watcher follows the task while the
question waits; once the task has moved on, it withdraws the question (cancelled, saying why) and watches on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from a2a.client import A2AClientTimeoutError, Client
from a2a.helpers import get_data_parts
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, UnsupportedOperationError

from . import _core
from ._async import AsyncHoldpoint
from ._errors import ConflictError
from ._types import AskResult, Assignee, JsonObject, Urgency

TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
"""States a task never leaves."""
ASKING_STATES = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
"""States in which the task waits for the client: the watcher asks a person."""


class TaskWatcher:
    """Follows A2A tasks of one agent (an ``a2a.client.Client``) and answers their requests for input through
    Holdpoint.

    The arguments shape every question: ``project``, ``urgency``, ``timeout_seconds`` (how long a person has to
    answer; the server's default for blocking questions otherwise), ``assignee``. ``poll_seconds`` is how often a
    task is read again when the agent cannot stream its updates.
    """

    def __init__(
        self,
        agent: Client,
        client: AsyncHoldpoint,
        *,
        project: str | None = None,
        urgency: Urgency | None = None,
        timeout_seconds: float | None = None,
        assignee: Assignee | None = None,
        poll_seconds: float = 1.0,
    ) -> None:
        self.agent = agent
        self.client = client
        self.project = project
        self.urgency = urgency
        self.timeout_seconds = timeout_seconds
        self.assignee = assignee
        self.poll_seconds = poll_seconds
        self.asked: list[AskResult] = []
        """The outcome of every question this watcher asked (or found already asked), in order."""

    async def send(self, message: Message, *, on_task: Any = None) -> Task:
        """Sends ``message`` (a new task, or a follow-up with its ``task_id``) and watches the task it belongs to
        until it ends; returns the task as it ended. ``on_task(task_id)`` is called as soon as the task's id is known
        (e.g. to keep it, for re-attaching after a restart)."""
        task_id = await self._consume(self.agent.send_message(SendMessageRequest(message=message)))
        if task_id is None:
            raise ValueError("the agent answered with a message, not a task: there is nothing to watch")
        if on_task is not None:
            on_task(task_id)
        return await self.watch(task_id)

    async def watch(self, task_id: str) -> Task:
        """Watches a task until it ends (``completed``, ``failed``, ``canceled`` or ``rejected``), asking a person
        each time it needs input; returns the task as it ended."""
        while True:
            task = await self.agent.get_task(GetTaskRequest(id=task_id))
            state = task.status.state
            if state in TERMINAL_STATES:
                return task
            if state in ASKING_STATES:
                answer = await self._ask(task)
                if isinstance(answer, _MovedOn):
                    continue
                try:
                    if answer is None:
                        return await self.agent.cancel_task(CancelTaskRequest(id=task.id))
                    await self._consume(self.agent.send_message(SendMessageRequest(message=answer)))
                except (UnsupportedOperationError, TaskNotCancelableError):
                    # The task ended between the answer and its reply: read it as it ended.
                    pass
                continue
            await self._follow(task_id)

    async def _follow(self, task_id: str) -> None:
        """Waits for the working task's next stop: its update stream when the agent streams, else a poll."""
        try:
            await self._consume(self.agent.subscribe(SubscribeToTaskRequest(id=task_id)))
        except NotImplementedError:
            await asyncio.sleep(self.poll_seconds)
        except (UnsupportedOperationError, A2AClientTimeoutError):
            # The task ended between reading it and subscribing, or the stream went quiet: read it again.
            pass

    async def _consume(self, stream: AsyncIterator[StreamResponse]) -> str | None:
        """Reads a response stream until the task stops for input or ends (a subscription stays open while the task
        waits); returns the task's id."""
        task_id: str | None = None
        try:
            async for response in stream:
                state = None
                if response.HasField("task"):
                    task_id, state = response.task.id, response.task.status.state
                elif response.HasField("status_update"):
                    task_id, state = response.status_update.task_id, response.status_update.status.state
                elif response.HasField("artifact_update"):
                    task_id = response.artifact_update.task_id
                if state in ASKING_STATES or state in TERMINAL_STATES:
                    break
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        return task_id

    async def _moved_on(self, task: Task) -> None:
        """Returns once the task is no longer at the request for input ``task`` shows: another state, or another
        request. Follows the task's updates when the agent streams them, else reads it every ``poll_seconds``."""
        at = _request_of(task)
        while True:
            try:
                stream = self.agent.subscribe(SubscribeToTaskRequest(id=task.id))
                try:
                    async for response in stream:
                        if response.HasField("task") and _request_of(response.task) != at:
                            return
                        if response.HasField("status_update"):
                            update = response.status_update
                            state, message_id = update.status.state, update.status.message.message_id
                            if state not in ASKING_STATES or (message_id and message_id != at[1]):
                                return
                finally:
                    close = getattr(stream, "aclose", None)
                    if close is not None:
                        await close()
            except NotImplementedError:
                await asyncio.sleep(self.poll_seconds)
            except UnsupportedOperationError:
                return  # the task has ended: a subscription to it is refused
            except A2AClientTimeoutError:
                pass
            current = await self.agent.get_task(GetTaskRequest(id=task.id))
            if _request_of(current) != at:
                return

    async def _ask(self, task: Task) -> Message | None | _MovedOn:
        """Asks a person what the task asks; returns the message to answer with, ``None`` when nobody did, or
        ``_MOVED_ON`` when the task went on without an answer (its question withdrawn)."""
        request = task.status.message
        text = message_text(request) or (
            "The agent needs authorization to go on." if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
            else "The agent needs input to go on."
        )
        first = text.strip().splitlines()[0] if text.strip() else text
        title = first if len(first) <= 300 else first[:299] + "…"
        state = "auth-required" if task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED else "input-required"
        context: JsonObject = {"a2a": {"task_id": task.id, "context_id": task.context_id, "state": state}}
        question = await self.client.create_question(
            title,
            kind="blocking",
            response_type="text",
            body=_core.clip_body(text) if text.strip() != title else None,
            context=context,
            project=self.project,
            urgency=self.urgency,
            timeout_seconds=self.timeout_seconds,
            assignee=self.assignee,
            idempotency_key=idempotency_key(task),
        )
        waiting = asyncio.ensure_future(self.client.wait(question.id))
        moved_on = asyncio.ensure_future(self._moved_on(task))
        try:
            await asyncio.wait({waiting, moved_on}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for running in (waiting, moved_on):
                if not running.done():
                    running.cancel()
            await asyncio.gather(waiting, moved_on, return_exceptions=True)
        if not waiting.done() or waiting.cancelled():
            moved_on.result()  # a failure to follow the task is the caller's to see
            try:
                withdrawn = await self.client.cancel(question.id, reason="The agent's task went on without this answer.")
                self.asked.append(AskResult(withdrawn))
            except ConflictError:
                # Answered meanwhile: the answer stays on the record, and the task has gone on without it.
                self.asked.append(AskResult(await self.client.get_question(question.id)))
            return _MOVED_ON
        result = waiting.result()
        self.asked.append(result)
        if result.outcome not in ("answered", "defaulted"):
            return None
        value = result.value
        part = Part(text=value) if isinstance(value, str) else Part(text=json.dumps(value))
        return Message(
            message_id=str(uuid.uuid4()),
            task_id=task.id,
            context_id=task.context_id,
            role=Role.ROLE_USER,
            parts=[part],
            metadata=_metadata(result),
        )


class _MovedOn:
    """The task went on without the answer to its request for input."""


_MOVED_ON = _MovedOn()


def _request_of(task: Task) -> tuple[TaskState, str]:
    """Which request for input the task is at: its state and its status message's id."""
    return task.status.state, task.status.message.message_id


def message_text(message: Message) -> str:
    """A message's text parts, and its data parts as JSON, one per line."""
    lines = []
    for part in message.parts:
        if part.HasField("text"):
            lines.append(part.text)
        elif part.HasField("data"):
            lines.extend(json.dumps(data) for data in get_data_parts([part]))
        elif part.HasField("url"):
            lines.append(part.url)
    return "\n".join(lines)


def idempotency_key(task: Task) -> str:
    """One question per request for input: the task's id and its status message's id, else the time of the status,
    else how long the task's history is (a status with neither is told apart by the turns before it)."""
    if task.status.message.message_id:
        marker = task.status.message.message_id
    elif task.status.HasField("timestamp"):
        marker = task.status.timestamp.ToJsonString()
    else:
        marker = f"turn-{len(task.history)}"
    key = f"a2a:{task.id}:{marker}"
    return key if len(key) <= 200 else "a2a:" + hashlib.sha256(key.encode()).hexdigest()


def _metadata(result: AskResult) -> Mapping[str, Any]:
    meta: dict[str, Any] = {"question_id": result.question_id, "outcome": result.outcome}
    if result.answered_by:
        meta["answered_by"] = result.answered_by
    if result.comment:
        meta["comment"] = result.comment
    return {"holdpoint": meta}


__all__ = ["ASKING_STATES", "TERMINAL_STATES", "TaskWatcher", "idempotency_key", "message_text"]
