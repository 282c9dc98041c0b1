"""An AG-UI agent that stops to ask: it proposes a deploy tool call, and ends the run with three interrupts (approve
the call, write the release notes, confirm paging the on-call); the next run acts on the answers. Served over AG-UI's
HTTP transport with the ag-ui-protocol package's own event encoder.

    python ag_ui_agent.py   # serves http://127.0.0.1:8000/ (AG_UI_PORT to change it)

No model and no API key: what it does is scripted. Threads live in memory as long as it runs; interrupts expire
after INTERRUPT_TTL_SECONDS (default 1800). Needs `pip install "./sdk/python[ag-ui]" uvicorn`.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "editedArgs": {"type": "object"}},
    "required": ["approved"],
}
NOTES_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "title": "Release notes"},
        "notify": {"type": "boolean", "title": "Email the customers"},
    },
    "required": ["summary"],
}


def text(message_id: str, content: str) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=content),
        TextMessageEndEvent(message_id=message_id),
    ]


class Deployer:
    """The agent: one thread's open interrupts and proposed call are kept until a run resumes them."""

    def __init__(self, ttl_seconds: float) -> None:
        self.ttl = timedelta(seconds=ttl_seconds)
        self.open: dict[str, dict[str, Any]] = {}

    def run(self, input: RunAgentInput) -> list[BaseEvent]:
        started = RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        pending = self.open.get(input.thread_id)
        if pending is None:
            return [started, *self.propose(input)]
        answers = {entry.interrupt_id: entry for entry in input.resume or ()}
        if set(answers) != set(pending["interrupts"]):
            missing = sorted(set(pending["interrupts"]) - set(answers))
            error = RunErrorEvent(message=f"the thread has open interrupts: {missing}", code="RESUME_REQUIRED")
            return [started, error]
        expired = datetime.now(timezone.utc) > pending["expires"]
        late = [i for i, e in answers.items() if e.status == "resolved" and expired]
        if late:
            return [started, RunErrorEvent(message=f"resumed after the interrupts expired: {late}", code="EXPIRED")]
        del self.open[input.thread_id]
        return [started, *self.act(input, pending, answers)]

    def propose(self, input: RunAgentInput) -> list[BaseEvent]:
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        arguments = {"service": "api", "environment": "production"}
        reply = AssistantMessage(
            id=f"msg-{uuid.uuid4().hex[:8]}",
            content="I will deploy the api service to production.",
            tool_calls=[ToolCall(id=call_id, function=FunctionCall(name="deploy", arguments=json.dumps(arguments)))],
        )
        expires = datetime.now(timezone.utc) + self.ttl
        at = expires.isoformat().replace("+00:00", "Z")
        interrupts = [
            Interrupt(
                id="approve-deploy",
                reason="tool_call",
                tool_call_id=call_id,
                message="Deploy the api service to production?",
                response_schema=APPROVAL_SCHEMA,
                expires_at=at,
            ),
            Interrupt(
                id="release-notes",
                reason="input_required",
                message="What should the release notes say?",
                response_schema=NOTES_SCHEMA,
                expires_at=at,
            ),
            Interrupt(id="page-on-call", reason="confirmation", message="Page the on-call engineer?", expires_at=at),
        ]
        self.open[input.thread_id] = {
            "interrupts": [i.id for i in interrupts],
            "call": (call_id, arguments),
            "expires": expires,
        }
        return [
            *text(reply.id, reply.content or ""),
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name="deploy", parent_message_id=reply.id),
            ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(arguments)),
            ToolCallEndEvent(tool_call_id=call_id),
            MessagesSnapshotEvent(messages=[*input.messages, reply]),
            RunFinishedEvent(
                thread_id=input.thread_id,
                run_id=input.run_id,
                outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
            ),
        ]

    def act(self, input: RunAgentInput, pending: dict[str, Any], answers: dict[str, Any]) -> list[BaseEvent]:
        call_id, arguments = pending["call"]
        approval, notes, page = answers["approve-deploy"], answers["release-notes"], answers["page-on-call"]
        deployed = None
        if approval.status == "resolved" and approval.payload.get("approved"):
            deployed = approval.payload.get("editedArgs") or arguments
            outcome = f"deployed {deployed['service']} to {deployed['environment']}"
        elif approval.status == "resolved":
            outcome = "not deployed: the deploy was rejected"
        else:
            outcome = "not deployed: nobody decided in time"
        result = {
            "deployed": deployed,
            "notes": notes.payload if notes.status == "resolved" else None,
            "paged": page.payload if page.status == "resolved" else None,
            "cancelled": sorted(i for i, e in answers.items() if e.status == "cancelled"),
        }
        return [
            ToolCallResultEvent(message_id=f"msg-{uuid.uuid4().hex[:8]}", tool_call_id=call_id, content=outcome),
            *text(f"msg-{uuid.uuid4().hex[:8]}", outcome.capitalize() + "."),
            RunFinishedEvent(
                thread_id=input.thread_id, run_id=input.run_id, result=result, outcome=RunFinishedSuccessOutcome()
            ),
        ]


def create_app(ttl_seconds: float = 1800) -> Starlette:
    """The agent as an ASGI app: POST a RunAgentInput to /, read the run's events as server-sent events."""
    agent = Deployer(ttl_seconds)

    async def run(request: Request) -> StreamingResponse:
        input = RunAgentInput.model_validate(await request.json())
        encoder = EventEncoder(accept=request.headers.get("accept", ""))

        async def events() -> AsyncIterator[str]:
            for event in agent.run(input):
                yield encoder.encode(event)

        return StreamingResponse(events(), media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/", run, methods=["POST"])])


if __name__ == "__main__":
    import uvicorn

    port = int(os.environ.get("AG_UI_PORT", "8000"))
    uvicorn.run(create_app(float(os.environ.get("INTERRUPT_TTL_SECONDS", "1800"))), host="127.0.0.1", port=port)
