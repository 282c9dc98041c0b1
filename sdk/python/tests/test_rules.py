"""``approve()``, ``@requires_approval``, the OpenAI Agents and the AG-UI adapters ask through the workspace's
approval rules (``POST /decide``): a call a rule allows runs at once without a question, one a rule denies is refused
naming the rule, and one a rule asks about waits for a person, whose edited arguments come back.

The rules name tools (and an agent) of this module's own, so the document leaves every other test's calls to its
default, ``ask``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ag_ui.core import Interrupt

from holdpoint_client import ApprovalDenied, AsyncHoldpoint, Holdpoint, requires_approval
from holdpoint_client.ag_ui import HoldpointInterrupts, ToolCall

from .conftest import Server
from .helpers import Answerer, pending_in, run_flow
from .mock_model import MockModel

SUFFIX = uuid.uuid4().hex[:8]
WIPE, READ, PAY = f"wipe_{SUFFIX}", f"read_{SUFFIX}", f"pay_{SUFFIX}"
DENIED_AGENT = f"denied-deployer-{SUFFIX}"


@pytest.fixture(scope="module", autouse=True)
def rules(server: Server) -> Iterator[None]:
    document = {
        "default": "ask",
        "rules": [
            {"name": "no-wipes", "tools": [WIPE], "decision": "deny", "reason": "restore from the backups instead"},
            {"name": "reads", "tools": [READ], "decision": "allow"},
            {
                "name": "large-payments",
                "tools": [PAY],
                "when": "args.amount > 1000",
                "decision": "ask",
                "reason": "payments over 1000 need a person",
                "ask": {"urgency": "high"},
            },
            {"name": "small-payments", "tools": [PAY], "when": "args.amount <= 1000", "decision": "allow"},
            {
                "name": "no-deployer",
                "tools": ["deploy"],
                "agents": [DENIED_AGENT],
                "decision": "deny",
                "reason": "this agent never deploys",
            },
        ],
    }
    saved = server.api("PUT", "/rules", json=document)
    assert saved.status_code == 200, saved.text
    yield
    server.api("PUT", "/rules", json={"rules": [], "default": "ask"})


def test_a_call_a_rule_allows_comes_back_at_once_without_a_question(hp: Holdpoint, project: str) -> None:
    started = time.monotonic()
    result = hp.approve(READ, {"path": "/etc/hosts"}, project=project)
    assert (result.outcome, result.approved, result.decision, result.rule) == ("allowed_by_rule", True, "allow", "reads")
    assert (result.question, result.arguments) == (None, {"path": "/etc/hosts"})
    small = hp.approve(PAY, {"amount": 250}, project=project)
    assert (small.outcome, small.rule, small.arguments) == ("allowed_by_rule", "small-payments", {"amount": 250})
    assert time.monotonic() - started < 5, "nobody was waited for"
    assert pending_in(hp, project) == [], "nobody was asked"


def test_a_call_a_rule_denies_is_refused_naming_the_rule(
    server: Server, agent_token: str, hp: Holdpoint, project: str
) -> None:
    result = hp.approve(WIPE, {"path": "/srv"}, project=project)
    assert (result.outcome, result.approved, result.rejected) == ("denied_by_rule", False, False)
    assert (result.rule, result.rule_reason, result.question) == ("no-wipes", "restore from the backups instead", None)
    assert result.reason() == "denied by rule no-wipes: restore from the backups instead"

    async def in_asyncio() -> str:
        async with AsyncHoldpoint(server.url, agent_token) as client:
            denied = await client.approve(WIPE, {"path": "/var"}, project=project)
            return denied.outcome

    assert asyncio.run(in_asyncio()) == "denied_by_rule"
    assert pending_in(hp, project) == []


def test_a_call_a_rule_asks_about_waits_for_a_person_whose_edit_comes_back(
    server: Server, hp: Holdpoint, project: str
) -> None:
    with Holdpoint(server.url, server.create_token("approver")) as approver:
        answerer = Answerer(approver, project, True, comment="half now", edited_arguments={"amount": 1000})
        result = hp.approve(PAY, {"amount": 2000}, project=project, allow_edit=True, urgency="low")
        question = answerer.join()
    assert (result.outcome, result.approved, result.decision) == ("answered", True, "allow")
    assert (result.arguments, result.comment) == ({"amount": 1000}, "half now")
    assert result.question is not None and result.question_id == question.id
    assert result.question.urgency == "high", "the rule's own ask wins over the caller's"
    assert result.question.allow_edit, "where the rule is silent, the caller's wish counts"
    assert result.answered_by == question.answered_by is not None


def test_the_decorator_obeys_a_deny(hp: Holdpoint, project: str) -> None:
    calls: list[str] = []

    @requires_approval(hp, project=project, tool_name=WIPE)
    def wipe(path: str) -> None:
        calls.append(path)

    with pytest.raises(ApprovalDenied) as denied:
        wipe("/srv/backup")
    assert calls == []
    assert (denied.value.result.outcome, denied.value.result.rule) == ("denied_by_rule", "no-wipes")
    assert f"{WIPE} was not approved (denied_by_rule)" in str(denied.value)

    @requires_approval(hp, project=project, tool_name=READ)
    def read(path: str) -> str:
        return f"read {path}"

    assert read("/etc/hosts") == "read /etc/hosts", "an allowed call runs at once"
    assert pending_in(hp, project) == []


def test_the_openai_agents_adapter_obeys_a_deny(
    server: Server, agent_token: str, project: str, tmp_path: Path
) -> None:
    model = MockModel("deploy", {"service": "api", "environment": "production"})
    try:
        env = {
            "HOLDPOINT_URL": server.url,
            "HOLDPOINT_TOKEN": agent_token,
            "MODEL_URL": model.url,
            "PROJECT": project,
            "STATE_DIR": str(tmp_path / "runs"),
            "RUN_KEY": f"deploy-{project}",
            "TOOL_LOG": str(tmp_path / "deployments.txt"),
            "EDITABLE": "0",
            "AGENT_NAME": DENIED_AGENT,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
        }
        finished = run_flow("openai_agents_flow.py", "run", env=env)
        assert finished.returncode == 0, finished.stderr
        output = json.loads(finished.stdout)["output"]
        assert "no-deployer" in output and "this agent never deploys" in output, output
        assert not (tmp_path / "deployments.txt").exists(), "the denied tool never ran"
        assert server.api("GET", f"/questions?project={project}").json()["items"] == [], "nobody was asked"
    finally:
        model.close()


def test_ag_ui_tool_call_interrupts_the_rules_decide_are_resumed_at_once_without_a_question(
    server: Server, agent_token: str, project: str
) -> None:
    interrupts = [
        Interrupt(id="wipe", reason="tool_call", tool_call_id="call-wipe"),
        Interrupt(id="read", reason="tool_call", tool_call_id="call-read"),
    ]
    calls = {"call-wipe": ToolCall(WIPE, {"path": "/srv"}), "call-read": ToolCall(READ, {"path": "/etc/hosts"})}

    async def resume() -> list[tuple[str, str, object, object]]:
        async with AsyncHoldpoint(server.url, agent_token) as client:
            entries = await HoldpointInterrupts(client, project=project).resume(
                "thread-rules", "run-1", interrupts, tool_calls=calls
            )
        assert entries is not None
        return [(e.interrupt_id, e.status, e.payload, (e.metadata or {})["holdpoint"]) for e in entries]

    assert asyncio.run(resume()) == [
        (
            "wipe",
            "resolved",
            {"approved": False},
            {
                "outcome": "denied_by_rule",
                "question_id": None,
                "comment": "restore from the backups instead",
                "rule": "no-wipes",
            },
        ),
        ("read", "resolved", {"approved": True}, {"outcome": "allowed_by_rule", "question_id": None, "rule": "reads"}),
    ]
    assert server.api("GET", f"/questions?project={project}").json()["items"] == [], "nobody was asked"
