"""``holdpoint_client.ag_ui`` with the real ``ag-ui-protocol`` package: the example agent (served with the package's
own event encoder) ends its run with three interrupts; the adapter asks them in Holdpoint, and the next run acts on
the answers — after the adapter's process was killed and started again, and when nobody answers in time."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    Interrupt,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    TextMessageChunkEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from holdpoint_client import AsyncHoldpoint, Option, Question
from holdpoint_client.ag_ui import HoldpointInterrupts, idempotency_key, messages_after, run_agent, tool_calls_of

from .conftest import Server
from .helpers import eventually, example_module, kill, serving, start_example

AGENT = example_module("ag_ui_agent")


def asked_for(server: Server, project: str, thread_id: str, status: str | None = None) -> list[dict[str, Any]]:
    """The questions of one AG-UI thread, oldest first."""
    query = f"/questions?project={project}&limit=200" + (f"&status={status}" if status else "")
    items: list[dict[str, Any]] = server.api("GET", query).json()["items"]
    mine = [q for q in items if q["context"].get("ag_ui", {}).get("thread_id") == thread_id]
    return sorted(mine, key=lambda q: q["context"]["ag_ui"]["interrupt_id"])


def three(questions: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return questions if len(questions) == 3 else None


def test_the_example_asks_each_interrupt_once_across_a_restart_and_the_next_run_acts_on_the_answers(
    server: Server, agent_token: str, tmp_path: Path
) -> None:
    thread_id = f"deploy-{uuid.uuid4().hex[:8]}"
    with serving(lambda url: AGENT.create_app(1800)) as agent_url:
        env = {
            "HOLDPOINT_SERVER": server.url,
            "HOLDPOINT_TOKEN": agent_token,
            "AG_UI_URL": agent_url,
            "THREAD_ID": thread_id,
        }
        first = start_example("ag_ui_deploy.py", tmp_path, env)
        try:
            questions = eventually("three questions", lambda: three(asked_for(server, "ag-ui-demo", thread_id)), 60)
        finally:
            kill(first)  # the adapter dies while people decide
        assert list((tmp_path / "ag-ui-runs").glob("*.json")), "the interrupted run was kept before anyone was asked"

        approval, confirmation, notes = questions  # by interrupt id: approve-deploy, page-on-call, release-notes
        assert approval["kind"] == "approval" and approval["allow_edit"] is True
        assert approval["title"] == "Deploy the api service to production?"
        proposed = {"service": "api", "environment": "production"}
        assert approval["action"] == {"tool_name": "deploy", "arguments": proposed}
        assert notes["response_type"] == "form"
        assert [(f["key"], f["response_type"], f["required"]) for f in notes["fields"]] == [
            ("summary", "text", True),
            ("notify", "boolean", False),
        ]
        assert confirmation["response_type"] == "boolean" and confirmation["title"] == "Page the on-call engineer?"
        run_id = approval["context"]["ag_ui"]["run_id"]
        assert all(q["timeout_at"] is not None for q in questions), "the interrupts' expiresAt is each deadline"

        # A second later, a deadline counted from the restart would differ from the first request's: the adapter
        # must send the same request again for the server to answer with the same questions.
        time.sleep(1.1)
        second = start_example("ag_ui_deploy.py", tmp_path, env)
        edit = {"service": "api", "environment": "staging"}
        answers = [
            (approval, {"value": True, "edited_arguments": edit}),
            (notes, {"value": {"summary": "Faster logins", "notify": False}}),
            (confirmation, {"value": False, "comment": "not at night"}),
        ]
        for question, answer in answers:
            answered = server.api("POST", f"/questions/{question['id']}/answer", json=answer)
            assert answered.status_code == 200, answered.text
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err

    assert json.loads(out) == {
        "cancelled": [],
        "deployed": {"environment": "staging", "service": "api"},
        "notes": {"notify": False, "summary": "Faster logins"},
        "paged": False,
    }
    assert len(asked_for(server, "ag-ui-demo", thread_id)) == 3, "the restarted adapter found the same questions"
    assert approval["context"]["ag_ui"]["interrupt_id"] == "approve-deploy"
    assert idempotency_key(thread_id, run_id, "approve-deploy").startswith("ag-ui:")
    assert not list((tmp_path / "ag-ui-runs").glob("*.json")), "a finished thread leaves nothing behind"


def test_interrupts_nobody_answers_before_they_expire_are_resumed_as_cancelled(
    server: Server, agent_token: str, project: str
) -> None:
    thread_id = f"late-{uuid.uuid4().hex[:8]}"

    async def go(agent_url: str) -> Any:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            first = RunAgentInput(
                thread_id=thread_id, run_id=str(uuid.uuid4()), messages=[UserMessage(id="u1", content="Deploy api")]
            )
            return await run_agent(agent_url, first, HoldpointInterrupts(hp, project=project))

    with serving(lambda url: AGENT.create_app(3)) as agent_url:
        run = asyncio.run(go(agent_url))

    assert run.result == {
        "cancelled": ["approve-deploy", "page-on-call", "release-notes"],
        "deployed": None,
        "notes": None,
        "paged": None,
    }
    [entries] = run.resumed
    assert [(e.interrupt_id, e.status, e.payload) for e in entries] == [
        ("approve-deploy", "cancelled", None),
        ("release-notes", "cancelled", None),
        ("page-on-call", "cancelled", None),
    ]
    questions = asked_for(server, project, thread_id)
    assert len(questions) == 3 and {q["status"] for q in questions} == {"expired"}
    assert {e.metadata["holdpoint"]["outcome"] for e in entries if e.metadata} == {"expired"}


def test_a_deadline_beyond_the_servers_longest_timeout_and_a_schema_of_many_properties_are_asked_as_they_are(
    server: Server, agent_token: str, project: str
) -> None:
    # Three days ahead is past the server's longest timeout (24 h here): the question is asked with that timeout
    # rather than refused; twelve properties are twelve fields, not one free-text box.
    far = (datetime.now(timezone.utc) + timedelta(days=3)).isoformat()
    properties = {f"check_{n:02}": {"type": "boolean", "title": f"Check {n}"} for n in range(12)}
    interrupts = [
        Interrupt(id="far", reason="input_required", message="Which region?", expires_at=far),
        Interrupt(
            id="checklist",
            reason="input_required",
            message="Go through the checklist",
            response_schema={"type": "object", "properties": properties},
        ),
    ]

    async def go() -> tuple[Any, list[Any]]:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            bounds = await hp.timeout_bounds()
            asked = await HoldpointInterrupts(hp, project=project).ask("thread-far", "run-far", interrupts)
            return bounds, [item.question for item in asked]

    bounds, (far_question, checklist) = asyncio.run(go())
    assert (bounds.min_seconds, bounds.max_seconds) == (1, 86_400)
    assert far_question is not None and far_question.pending and far_question.timeout_at is not None
    remaining = (far_question.timeout_at - datetime.now(timezone.utc)).total_seconds()
    assert 86_400 - 120 < remaining <= 86_400, remaining
    assert checklist is not None and checklist.response_type == "form"
    assert [f.key for f in checklist.fields] == list(properties)


def test_a_schema_of_one_typed_value_is_asked_as_that_type_and_resumed_with_the_value(
    server: Server, agent_token: str, project: str
) -> None:
    interrupts = [
        Interrupt(
            id="region",
            reason="input_required",
            message="Which region?",
            response_schema={"type": "string", "enum": ["eu-west", "us-east"]},
        ),
        Interrupt(
            id="replicas",
            reason="input_required",
            message="How many replicas?",
            response_schema={"type": "integer", "minimum": 1, "maximum": 9},
        ),
    ]

    async def ask() -> list[Any]:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            asked = await HoldpointInterrupts(hp, project=project).ask("thread-typed", "run-typed", interrupts)
            return [item.question for item in asked]

    region, replicas = asyncio.run(ask())
    assert region.response_type == "choice" and [o.value for o in region.options] == ["eu-west", "us-east"]
    assert replicas.response_type == "integer" and (replicas.raw["min"], replicas.raw["max"]) == (1, 9)
    refused = server.api("POST", f"/questions/{replicas.id}/answer", json={"value": 12})
    assert refused.status_code == 422, refused.text
    for question, value in ((region, "us-east"), (replicas, 3)):
        answered = server.api("POST", f"/questions/{question.id}/answer", json={"value": value})
        assert answered.status_code == 200, answered.text

    async def resume() -> Any:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            return await HoldpointInterrupts(hp, project=project).resume("thread-typed", "run-typed", interrupts)

    entries = asyncio.run(resume())
    assert [(e.interrupt_id, e.status, e.payload) for e in entries] == [
        ("region", "resolved", "us-east"),
        ("replicas", "resolved", 3),
    ]


def test_an_agent_that_streams_its_turn_without_a_snapshot_finds_it_in_the_next_runs_messages(
    server: Server, agent_token: str, project: str
) -> None:
    thread_id = f"streamed-{uuid.uuid4().hex[:8]}"
    deployer = AGENT.Deployer(3)
    inputs: list[RunAgentInput] = []

    async def run(request: Request) -> StreamingResponse:
        input = RunAgentInput.model_validate(await request.json())
        inputs.append(input)
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        # The agent's own events, but no MESSAGES_SNAPSHOT: its reply and the call reach the client as a stream only.
        streamed = [event for event in deployer.run(input) if not isinstance(event, MessagesSnapshotEvent)]

        async def events() -> AsyncIterator[str]:
            for event in streamed:
                yield encoder.encode(event)

        return StreamingResponse(events(), media_type=encoder.get_content_type())

    async def go(agent_url: str) -> Any:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            first = RunAgentInput(
                thread_id=thread_id, run_id=str(uuid.uuid4()), messages=[UserMessage(id="u1", content="Deploy api")]
            )
            return await run_agent(agent_url, first, HoldpointInterrupts(hp, project=project))

    with serving(lambda url: Starlette(routes=[Route("/", run, methods=["POST"])])) as agent_url:
        asyncio.run(go(agent_url))

    first, second = inputs
    assert [m.role for m in second.messages] == ["user", "assistant"]
    assert second.messages[0] == first.messages[0]
    reply = second.messages[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.content == "I will deploy the api service to production."
    [call] = reply.tool_calls or []
    assert call.function.name == "deploy"
    assert json.loads(call.function.arguments) == {"service": "api", "environment": "production"}
    approval = asked_for(server, project, thread_id)[0]
    assert approval["action"] == {"tool_name": "deploy", "arguments": {"service": "api", "environment": "production"}}


def test_chunks_and_results_are_applied_where_ag_uis_client_puts_them() -> None:
    thread = [UserMessage(id="u1", content="Deploy api")]
    events = [
        TextMessageChunkEvent(message_id="a1", role="assistant", delta="I will "),
        TextMessageChunkEvent(delta="deploy."),
        ToolCallChunkEvent(tool_call_id="c1", tool_call_name="deploy", parent_message_id="a1", delta='{"service":'),
        ToolCallChunkEvent(delta=' "api"}'),
        # A call whose named parent is the person's message gets an assistant message of its own, with its own id.
        ToolCallStartEvent(tool_call_id="c2", tool_call_name="page", parent_message_id="u1"),
        TextMessageChunkEvent(message_id="a2", role="assistant", delta="Waiting."),
        ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="queued"),
    ]
    messages = messages_after(thread, events)
    assert [(m.id, m.role) for m in messages] == [
        ("u1", "user"), ("a1", "assistant"), ("r1", "tool"), ("c2", "assistant"), ("a2", "assistant")
    ]
    reply = messages[1]
    assert isinstance(reply, AssistantMessage) and reply.content == "I will deploy."
    assert [(c.id, c.function.name, c.function.arguments) for c in reply.tool_calls or []] == [
        ("c1", "deploy", '{"service": "api"}')
    ]
    result = messages[2]
    assert isinstance(result, ToolMessage) and result.tool_call_id == "c1" and result.content == "queued"
    assert tool_calls_of(messages=messages)["c1"].arguments == {"service": "api"}


def test_a_response_schema_becomes_a_form_and_the_answer_comes_back_as_the_schema_types_it(
    server: Server, agent_token: str, project: str
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "enum": ["eu-west", "us-east"]},
            "size": {"oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "zones": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
            "nodes": {"type": "integer", "title": "Nodes"},
            "labels": {"type": "object", "description": "Labels"},
        },
        "required": ["region", "nodes"],
    }
    interrupt = Interrupt(
        id="cluster", reason="input_required", message="Shape the new cluster", response_schema=schema
    )
    thread_id = f"form-{uuid.uuid4().hex[:8]}"

    async def answer_and_resume() -> list[ResumeEntry] | None:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            interrupts = HoldpointInterrupts(hp, project=project)
            [asked] = await interrupts.ask(thread_id, "run-1", [interrupt])
            assert asked.question is not None
            fields = [(f.key, f.label, f.response_type, f.required) for f in asked.question.fields]
            assert fields == [
                ("region", "region", "choice", True),
                ("size", "size", "choice", False),
                ("zones", "zones", "multi_choice", False),
                ("nodes", "Nodes", "integer", True),
                ("labels", "Labels (JSON)", "text", False),
            ]
            assert [Option.of(o).label for o in asked.question.fields[1].options] == ["Small", "Large"]
            value = {"region": "us-east", "size": "l", "zones": ["a", "c"], "nodes": 3, "labels": '{"team": "core"}'}
            answered = server.api("POST", f"/questions/{asked.question.id}/answer", json={"value": value})
            assert answered.status_code == 200, answered.text
            return await interrupts.resume(thread_id, "run-1", [interrupt])

    entries = asyncio.run(answer_and_resume())
    assert entries is not None
    [entry] = entries
    assert (entry.interrupt_id, entry.status) == ("cluster", "resolved")
    typed = {"region": "us-east", "size": "l", "zones": ["a", "c"], "nodes": 3, "labels": {"team": "core"}}
    assert entry.payload == typed
    assert isinstance(entry.payload["nodes"], int)
    assert entry.metadata is not None and entry.metadata["holdpoint"]["answered_by"]
    assert len(asked_for(server, project, thread_id)) == 1, "asking again for the interrupt found the same question"


def test_a_schemas_bounds_and_whole_numbers_hold_and_its_enums_come_back_as_written(
    server: Server, agent_token: str, project: str
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "nodes": {"type": "integer", "minimum": 1, "maximum": 5, "title": "Nodes"},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1, "title": "Ratio"},
            "tier": {"type": "integer", "enum": [1, 2, 3], "title": "Tier"},
            "replicas": {"type": "array", "items": {"enum": [1, 3]}, "title": "Replicas"},
        },
        "required": ["nodes"],
    }
    interrupt = Interrupt(id="cluster", reason="input_required", message="Size the cluster", response_schema=schema)
    thread_id = f"bounds-{uuid.uuid4().hex[:8]}"

    async def answer_and_resume() -> list[ResumeEntry] | None:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            interrupts = HoldpointInterrupts(hp, project=project)
            [asked] = await interrupts.ask(thread_id, "run-1", [interrupt])
            assert asked.question is not None
            assert [f.key for f in asked.question.fields] == ["nodes", "ratio", "tier", "replicas"], "in their order"
            path = f"/questions/{asked.question.id}/answer"
            for value in ({"nodes": 9}, {"nodes": 2.5}, {"nodes": 0}, {"nodes": 2, "ratio": 1.5}):
                refused = server.api("POST", path, json={"value": value})
                assert refused.status_code == 422, (value, refused.text)
            answer = {"nodes": 2, "ratio": 0.5, "tier": "3", "replicas": ["1", "3"]}
            answered = server.api("POST", path, json={"value": answer})
            assert answered.status_code == 200, answered.text
            return await interrupts.resume(thread_id, "run-1", [interrupt])

    entries = asyncio.run(answer_and_resume())
    assert entries is not None
    [entry] = entries
    assert entry.status == "resolved"
    assert entry.payload == {"nodes": 2, "ratio": 0.5, "tier": 3, "replicas": [1, 3]}


def test_a_long_message_is_the_title_by_its_first_line_and_the_body_cut_to_what_the_server_takes(
    server: Server, agent_token: str, project: str
) -> None:
    message = "Restart the fleet?\n" + "The plan:\n" + "- restart one node\n" * 3000
    interrupt = Interrupt(id="restart", reason="confirmation", message=message)

    async def ask() -> Question | None:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            [asked] = await HoldpointInterrupts(hp, project=project).ask("thread-long", "run-1", [interrupt])
        return asked.question

    question = asyncio.run(ask())
    assert question is not None
    assert (question.title, question.response_type) == ("Restart the fleet?", "boolean")
    assert question.body.startswith(message[:1000]) and question.body.endswith("[…]")
    assert len(question.body.encode()) <= 32 * 1024
