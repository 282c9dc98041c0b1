"""Holdpoint approvals for the OpenAI Agents SDK: a tool with ``needs_approval`` pauses the run, a person approves
or rejects the call in Holdpoint, and the run goes on, also after the process was restarted in between.

The whole loop::

    from holdpoint_client import AsyncHoldpoint
    from holdpoint_client.openai_agents import HoldpointApprovals, run_with_approvals

    approvals = HoldpointApprovals(AsyncHoldpoint(url, token), state_dir=".holdpoint/runs")
    result = await run_with_approvals(agent, "Deploy the api service", approvals, run_key="deploy-api-1")

Each interruption of the run (``RunResult.interruptions``) is put to the workspace's approval rules (``POST
/decide``, with the agent's name): a call they allow runs and one they deny goes back to the model with the rule's
reason, without asking anyone; the others become one Holdpoint approval each, whose action is the tool's name and
arguments. The run's ``RunState`` is written to ``state_dir`` before anybody is asked, so a process that
dies while it waits is started again with the same ``run_key`` and carries on with the same questions (their
``Idempotency-Key`` is the run key and the tool call's id). An approval runs the tool; a rejection goes back to the
model with the person's comment as the reason; an approval nobody decided in time (expired or cancelled) is not a
"no" from anyone, and the model is told so. ``request`` and ``resume`` are the two halves, for code that runs the
agent itself.

Approvers may edit a tool's arguments only where the tool allows it: wrap it with ``approvals.editable(tool)``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, Runner, RunResult, RunResultStreaming, RunState, ToolApprovalItem
from agents.tool_context import ToolContext

from ._async import AsyncHoldpoint
from ._types import ApprovalResult, Assignee, JsonObject, Question, Urgency

STATE_VERSION = 2
"""Version 2 saves a call the rules decided without asking as its decision instead of a question id."""
READABLE_VERSIONS = (1, 2)

ContextSerializer = Callable[[Any], Any]
ContextDeserializer = Callable[[Any], Any]


class HoldpointApprovals:
    """Turns a run's tool approvals into Holdpoint questions and their answers into ``RunState`` decisions.

    ``state_dir`` holds one JSON file per run key with the serialised ``RunState`` and the questions asked for it
    (``RunState.to_json``: keep it where only the agent's own process can write). The remaining arguments shape every
    question: ``project``, ``urgency``, ``timeout_seconds`` (the approval's deadline), ``default`` (what applies
    when nobody decides in time; without it the approval expires and the call is not run), ``assignee``. The
    ``context_serializer`` and ``context_deserializer`` are passed to ``RunState`` for a run context that is not a
    plain mapping.
    """

    def __init__(
        self,
        client: AsyncHoldpoint,
        state_dir: str | os.PathLike[str],
        *,
        project: str | None = None,
        urgency: Urgency | None = None,
        timeout_seconds: float | None = None,
        default: bool | None = None,
        assignee: Assignee | None = None,
        context_serializer: ContextSerializer | None = None,
        context_deserializer: ContextDeserializer | None = None,
    ) -> None:
        self.client = client
        self.state_dir = Path(state_dir)
        self.project = project
        self.urgency = urgency
        self.timeout_seconds = timeout_seconds
        self.default = default
        self.assignee = assignee
        self._context_serializer = context_serializer
        self._context_deserializer = context_deserializer
        self._editable: set[str] = set()
        self._edits: dict[str, str] = {}

    # Tools -----------------------------------------------------------------------------------------------------

    def editable(self, tool: FunctionTool) -> FunctionTool:
        """A copy of ``tool`` whose approvals let the approver edit the arguments (``allow_edit``); when they do,
        the tool runs with theirs. The model's history keeps the call it asked for; Holdpoint's audit keeps both."""
        self._editable.add(tool.name)
        edited = copy.copy(tool)
        invoke = tool.on_invoke_tool
        edits = self._edits

        async def invoke_with_edit(context: ToolContext[Any], arguments: str) -> Any:
            return await invoke(context, edits.get(context.tool_call_id, arguments))

        edited.on_invoke_tool = invoke_with_edit
        return edited

    # Asking ----------------------------------------------------------------------------------------------------

    async def request(self, result: RunResult | RunResultStreaming, *, run_key: str) -> list[Question]:
        """Saves the run's state, then asks the workspace's approval rules about each interruption (``POST /decide``,
        the agent's name as the rules' ``agent``); returns the questions asked of people.

        A call the rules allow or deny is decided at once and asks nobody; the others become approval questions.
        Safe to call again for the same run (after a restart): the same calls get the same questions back.
        """
        state = result.to_state()
        items = list(result.interruptions)
        saved: JsonObject = {
            "version": STATE_VERSION,
            "state": state.to_json(context_serializer=self._context_serializer),
            "approvals": {},
        }
        # The state is on disk before anyone is asked: a crash after asking loses no question.
        self._write(run_key, saved)
        questions = []
        for item in items:
            call_id = _call_id(item)
            decided = await self.client.approve(
                item.name or "tool",
                _arguments(item),
                title=_title(item),
                allow_edit=(item.name or "") in self._editable,
                context={"agent": item.agent.name, "call_id": call_id, "run_key": run_key},
                project=self.project,
                urgency=self.urgency,
                timeout_seconds=self.timeout_seconds,
                default=self.default,
                assignee=self.assignee,
                agent=item.agent.name,
                idempotency_key=_idempotency_key(run_key, call_id),
                wait=False,
            )
            if decided.question is None:
                saved["approvals"][call_id] = {
                    "decision": decided.decision,
                    "rule": decided.rule,
                    "reason": decided.rule_reason,
                    "grant_id": decided.grant_id,
                    "arguments": decided.call_arguments,
                }
                continue
            saved["approvals"][call_id] = decided.question.id
            questions.append(decided.question)
        self._write(run_key, saved)
        return questions

    # Answering -------------------------------------------------------------------------------------------------

    async def decisions(
        self, run_key: str, *, wait: bool = True, timeout: float | None = None
    ) -> dict[str, ApprovalResult] | None:
        """The outcome of each saved approval by tool call id; ``None`` while one is still pending (``wait=False``,
        or the ``timeout`` ended the wait first)."""
        saved = self._read(run_key)
        results: dict[str, ApprovalResult] = {}
        for call_id, question_id in saved["approvals"].items():
            if isinstance(question_id, dict):
                # Decided by the rules when asked: nobody to wait for.
                results[call_id] = ApprovalResult.from_decision(question_id, question_id.get("arguments"))
                continue
            if wait:
                question = (await self.client.wait(question_id, timeout=timeout)).question
            else:
                question = await self.client.get_question(question_id)
            if question.pending:
                return None
            results[call_id] = ApprovalResult(question).waited(question)
        return results

    async def resume(
        self, agent: Agent[Any], *, run_key: str, wait: bool = True, timeout: float | None = None
    ) -> RunState[Any] | None:
        """The saved run's ``RunState`` with every approval decided, ready for ``Runner.run(agent, state)``;
        ``None`` while one is still pending (see ``decisions``)."""
        results = await self.decisions(run_key, wait=wait, timeout=timeout)
        if results is None:
            return None
        saved = self._read(run_key)
        state: RunState[Any] = await RunState.from_json(
            agent, saved["state"], context_deserializer=self._context_deserializer
        )
        for item in state.get_interruptions():
            result = results.get(_call_id(item))
            if result is None:
                # Not asked about (e.g. an interruption of another kind): leave it for the caller.
                continue
            if result.approved:
                if result.edited_arguments is not None and (item.name or "") in self._editable:
                    self._edits[_call_id(item)] = json.dumps(result.edited_arguments)
                state.approve(item)
            else:
                state.reject(item, rejection_message=rejection_message(result))
        return state

    def saved(self, run_key: str) -> bool:
        """Whether a run with this key is waiting for approvals (its state is on disk)."""
        return self._path(run_key).exists()

    def forget(self, run_key: str) -> None:
        """Deletes the saved state of a run that is over."""
        self._path(run_key).unlink(missing_ok=True)

    # Plumbing --------------------------------------------------------------------------------------------------

    def _path(self, run_key: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_key).strip(".") or "run"
        if safe != run_key:
            safe = f"{safe[:80]}-{hashlib.sha256(run_key.encode()).hexdigest()[:12]}"
        return self.state_dir / f"{safe}.json"

    def _write(self, run_key: str, saved: JsonObject) -> None:
        path = self._path(run_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        with open(partial, "w", encoding="utf-8") as file:
            json.dump(saved, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)

    def _read(self, run_key: str) -> JsonObject:
        path = self._path(run_key)
        try:
            saved: JsonObject = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LookupError(f"no saved run {run_key!r} in {self.state_dir}") from None
        if saved.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"{path} was written by another version of holdpoint_client.openai_agents")
        return saved


async def run_with_approvals(
    agent: Agent[Any],
    input: str | list[Any],
    approvals: HoldpointApprovals,
    *,
    run_key: str,
    context: Any = None,
    **runner_kwargs: Any,
) -> RunResult:
    """``Runner.run`` that asks Holdpoint whenever the run needs an approval, waits for the decisions and goes on,
    until the run finishes.

    A run whose state is saved under ``run_key`` (the process stopped while it waited) is resumed from there instead
    of being started again with ``input``, so the model is not called again for what it already did. An approved
    call that was running when the process died runs again: the state is saved between steps, not inside a tool.
    """
    if approvals.saved(run_key):
        state = await approvals.resume(agent, run_key=run_key)
        assert state is not None
        result = await Runner.run(agent, state, **runner_kwargs)
    else:
        result = await Runner.run(agent, input, context=context, **runner_kwargs)
    while result.interruptions:
        await approvals.request(result, run_key=run_key)
        state = await approvals.resume(agent, run_key=run_key)
        assert state is not None
        result = await Runner.run(agent, state, **runner_kwargs)
    approvals.forget(run_key)
    return result


def rejection_message(result: ApprovalResult) -> str:
    """What the model reads for a call that was not approved: the rule's or the person's reason, or that nobody
    decided."""
    if result.denied_by_rule:
        rule = f"The approval rule {result.rule}" if result.rule else "The approval rules"
        reason = result.rule_reason or "no reason given"
        return f"{rule} refused this call: {reason}. Do not retry the same call unchanged."
    if result.rejected:
        who = "A person" if result.outcome == "answered" else "The approval's default"
        reason = result.comment or "no reason given"
        return f"{who} rejected this call: {reason}. Do not retry the same call unchanged."
    if result.outcome == "expired":
        return "Nobody decided on this call before the approval's deadline, so it was not run."
    if result.outcome == "cancelled":
        return "The approval request for this call was cancelled, so it was not run."
    return "This call was not approved, so it was not run."


def _call_id(item: ToolApprovalItem) -> str:
    call_id = item.call_id
    if not call_id:
        raise ValueError(f"the approval for {item.name} carries no call id")
    return call_id


def _arguments(item: ToolApprovalItem) -> Any:
    raw = item.arguments
    if raw is None:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {"arguments": raw}


def _title(item: ToolApprovalItem) -> str:
    title = f"{item.agent.name} wants to call {item.name}"
    return title if len(title) <= 300 else title[:299] + "…"


def _idempotency_key(run_key: str, call_id: str) -> str:
    key = f"openai-agents:{run_key}:{call_id}"
    return key if len(key) <= 200 else "openai-agents:" + hashlib.sha256(key.encode()).hexdigest()


__all__ = ["HoldpointApprovals", "rejection_message", "run_with_approvals"]
