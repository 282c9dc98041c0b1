"""Holdpoint inside a LangGraph graph: a node asks a person, the graph interrupts and is checkpointed, and a later
``invoke`` (in this process or another, minutes or days later) resumes it with the answer.

In a node::

    from holdpoint_client.langgraph import ask

    def review(state: State) -> dict[str, Any]:
        result = ask(hp, "Publish this draft?", response_type="boolean", body=state["draft"])
        return {"publish": result.outcome == "answered" and result.value is True}

and to go on once the person answered (a cron job, a worker, the same script started again)::

    from holdpoint_client.langgraph import resume

    final_state = resume(graph, {"configurable": {"thread_id": "draft-42"}}, hp)

How it holds together:

- ``ask`` creates the question with an ``Idempotency-Key`` made of the thread id, the node's task (LangGraph's
  ``checkpoint_ns``, the same when the task is re-run after an interrupt) and ``key`` (default: the title). LangGraph
  re-runs an interrupted node from its start when it resumes; the server then returns the question it already has,
  so nobody is asked twice.
- It then calls LangGraph's ``interrupt()`` with the question's id: the graph stops and its checkpointer (use a
  durable one, e.g. ``langgraph-checkpoint-sqlite``) keeps the state. The process may exit.
- ``resume`` finds the thread's pending Holdpoint interrupts, waits for their outcomes and invokes the graph with
  ``Command(resume=...)``; the node's ``ask`` returns the outcome without another request.
- Work done *before* the ask in the same node runs again on resume (that is how LangGraph resumes): put side
  effects in an earlier node, which the checkpoint marks as done, or after the ask.
- ``approve`` asks the workspace's approval rules first (``POST /decide``): a call they allow or deny returns at
  once, and only one they ask about interrupts the graph.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from langgraph.config import get_config
from langgraph.types import Command, Interrupt, interrupt

from . import _core
from ._async import AsyncHoldpoint
from ._sync import Holdpoint
from ._types import (
    Action,
    ApprovalResult,
    AskResult,
    Assignee,
    FormField,
    JsonObject,
    JsonValue,
    Option,
    Question,
    QuestionKind,
    Response,
    ResponseType,
    Urgency,
)

INTERRUPT_KEY = "holdpoint"
"""The key of the interrupt value that marks an interrupt as a Holdpoint question: ``{"holdpoint": {...}}``."""


class _Graph(Protocol):
    """What ``resume`` needs of a compiled graph (``CompiledStateGraph`` and friends)."""

    def get_state(self, config: Any) -> Any: ...

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any: ...


class _AsyncGraph(Protocol):
    async def aget_state(self, config: Any) -> Any: ...

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any: ...


def ask(
    client: Holdpoint,
    title: str,
    *,
    key: str | None = None,
    kind: QuestionKind | None = None,
    response_type: ResponseType | None = None,
    body: str | None = None,
    options: Sequence[Option | str] | None = None,
    fields: Sequence[FormField] | None = None,
    action: Action | None = None,
    allow_edit: bool = False,
    context: Mapping[str, JsonValue] | None = None,
    project: str | None = None,
    run_id: str | None = None,
    urgency: Urgency | None = None,
    timeout_seconds: float | timedelta | None = None,
    default_response: Response | JsonValue = None,
    assignee: Assignee | None = None,
) -> AskResult:
    """Asks a person from inside a node and returns the outcome once the graph is resumed with it.

    Takes the fields of ``Holdpoint.ask``. ``key`` tells apart several questions with the same title asked in
    one node. The first run of the node ends here with an interrupt; the resumed run returns the outcome.
    """
    question = client.create_question(
        title,
        kind=kind,
        response_type=response_type,
        body=body,
        options=options,
        fields=fields,
        action=action,
        allow_edit=allow_edit,
        context=context,
        project=project,
        run_id=run_id,
        urgency=urgency,
        timeout_seconds=timeout_seconds,
        default_response=default_response,
        assignee=assignee,
        idempotency_key=_task_key(key or title),
    )
    resumed = interrupt(_interrupt_value(client.url, question))
    answered = _question_of_resume_value(resumed, question.id)
    if answered is not None:
        return AskResult(answered)
    # Resumed with a value of someone else's making (``Command(resume=True)``): Holdpoint has the outcome.
    return client.wait(question.id)


async def aask(
    client: AsyncHoldpoint,
    title: str,
    *,
    key: str | None = None,
    kind: QuestionKind | None = None,
    response_type: ResponseType | None = None,
    body: str | None = None,
    options: Sequence[Option | str] | None = None,
    fields: Sequence[FormField] | None = None,
    action: Action | None = None,
    allow_edit: bool = False,
    context: Mapping[str, JsonValue] | None = None,
    project: str | None = None,
    run_id: str | None = None,
    urgency: Urgency | None = None,
    timeout_seconds: float | timedelta | None = None,
    default_response: Response | JsonValue = None,
    assignee: Assignee | None = None,
) -> AskResult:
    """``ask`` for async nodes, with ``AsyncHoldpoint`` (LangGraph's ``interrupt`` needs Python 3.11 there)."""
    question = await client.create_question(
        title,
        kind=kind,
        response_type=response_type,
        body=body,
        options=options,
        fields=fields,
        action=action,
        allow_edit=allow_edit,
        context=context,
        project=project,
        run_id=run_id,
        urgency=urgency,
        timeout_seconds=timeout_seconds,
        default_response=default_response,
        assignee=assignee,
        idempotency_key=_task_key(key or title),
    )
    resumed = interrupt(_interrupt_value(client.url, question))
    answered = _question_of_resume_value(resumed, question.id)
    if answered is not None:
        return AskResult(answered)
    return await client.wait(question.id)


def approve(
    client: Holdpoint,
    tool_name: str,
    arguments: Mapping[str, JsonValue] | None = None,
    *,
    title: str | None = None,
    key: str | None = None,
    body: str | None = None,
    allow_edit: bool = False,
    context: Mapping[str, JsonValue] | None = None,
    project: str | None = None,
    run_id: str | None = None,
    urgency: Urgency | None = None,
    timeout_seconds: float | timedelta | None = None,
    default: bool | None = None,
    assignee: Assignee | None = None,
    agent: str | None = None,
) -> ApprovalResult:
    """Asks for permission to call one tool from inside a node; ``result.approved`` and ``result.arguments`` say
    whether and how to call it.

    The workspace's approval rules decide first (``POST /decide``, under the task's ``Idempotency-Key`` as ``ask``
    uses): a call they allow or deny returns at once, without an interrupt. When they ask a person, the node
    interrupts on the question as ``ask`` does, and the resumed run returns the person's decision.
    """
    result = client.approve(
        tool_name,
        arguments,
        title=title,
        body=body,
        allow_edit=allow_edit,
        context=context,
        project=project,
        run_id=run_id,
        urgency=urgency,
        timeout_seconds=timeout_seconds,
        default=default,
        assignee=assignee,
        agent=agent,
        idempotency_key=_task_key(key or f"approve:{tool_name}"),
        wait=False,
    )
    if result.question is None:
        return result
    resumed = interrupt(_interrupt_value(client.url, result.question))
    answered = _question_of_resume_value(resumed, result.question.id)
    if answered is not None:
        return result.waited(answered)
    return result.waited(client.wait(result.question.id).question)


def pending_questions(graph: _Graph, config: Any) -> list[str]:
    """The ids of the Holdpoint questions the thread is interrupted on."""
    return [question_id for _, question_id in _holdpoint_interrupts(graph.get_state(config).interrupts)]


def resume(
    graph: _Graph,
    config: Any,
    client: Holdpoint,
    *,
    wait: bool = True,
    timeout: float | timedelta | None = None,
) -> Any:
    """Resumes a thread interrupted by ``ask`` once its questions are resolved, and returns what ``invoke`` returns
    (the final state, or the next interrupt).

    Waits for the outcomes (at most ``timeout`` seconds); with ``wait=False``, or when the wait ends first, nothing
    is invoked and ``None`` is returned. A thread with no pending Holdpoint question is not invoked either (``None``).
    """
    pending = _holdpoint_interrupts(graph.get_state(config).interrupts)
    if not pending:
        return None
    answers: dict[str, JsonObject] = {}
    for interrupt_id, question_id in pending:
        result = client.wait(question_id, timeout=timeout) if wait else AskResult(client.get_question(question_id))
        if not result.resolved:
            return None
        answers[interrupt_id] = _resume_value(result.question)
    return graph.invoke(Command(resume=answers), config)


async def aresume(
    graph: _AsyncGraph,
    config: Any,
    client: AsyncHoldpoint,
    *,
    wait: bool = True,
    timeout: float | timedelta | None = None,
) -> Any:
    """``resume`` for asyncio: ``aget_state``, ``AsyncHoldpoint`` and ``ainvoke``."""
    pending = _holdpoint_interrupts((await graph.aget_state(config)).interrupts)
    if not pending:
        return None
    answers: dict[str, JsonObject] = {}
    for interrupt_id, question_id in pending:
        if wait:
            result = await client.wait(question_id, timeout=timeout)
        else:
            result = AskResult(await client.get_question(question_id))
        if not result.resolved:
            return None
        answers[interrupt_id] = _resume_value(result.question)
    return await graph.ainvoke(Command(resume=answers), config)


def _task_key(key: str) -> str:
    """The Idempotency-Key of a question asked by the current task: the same when LangGraph re-runs the task."""
    configurable = get_config().get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise RuntimeError(
            "holdpoint_client.langgraph.ask needs a graph compiled with a checkpointer and invoked with "
            '{"configurable": {"thread_id": ...}}: that is what lets the graph resume with the answer'
        )
    identity = "\0".join([str(thread_id), str(configurable.get("checkpoint_ns", "")), key])
    return "langgraph-" + hashlib.sha256(identity.encode()).hexdigest()[:48]


def _interrupt_value(url: str, question: Question) -> JsonObject:
    return {
        INTERRUPT_KEY: {
            "question_id": question.id,
            "title": question.title,
            "kind": question.kind,
            "url": f"{url}/questions/{question.id}",
        }
    }


def _resume_value(question: Question) -> JsonObject:
    return {INTERRUPT_KEY: {"question_id": question.id, "question": question.raw}}


def _question_of_resume_value(value: Any, question_id: str) -> Question | None:
    inner = value.get(INTERRUPT_KEY) if isinstance(value, dict) else None
    if not isinstance(inner, dict) or inner.get("question_id") != question_id:
        return None
    question = inner.get("question")
    if not isinstance(question, dict):
        return None
    parsed = Question.from_json(question)
    return None if parsed.pending else parsed


def _holdpoint_interrupts(interrupts: Sequence[Interrupt]) -> list[tuple[str, str]]:
    found = []
    for pending in interrupts:
        value = pending.value
        inner = value.get(INTERRUPT_KEY) if isinstance(value, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("question_id"), str):
            found.append((pending.id, inner["question_id"]))
    return found
