"""``holdpoint_client.openai_agents`` with the real OpenAI Agents SDK and a mock model on loopback: a tool with
``needs_approval`` becomes a Holdpoint approval; approving runs it, rejecting hands the comment to the model; the
``RunState`` is saved and the process replaced between the question and its answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Server
from .helpers import FLOWS, eventually, run_flow
from .mock_model import MockModel


@pytest.fixture
def model() -> Iterator[MockModel]:
    mock = MockModel("deploy", {"service": "api", "environment": "production"})
    yield mock
    mock.close()


def flow_env(
    server: Server, token: str, model: MockModel, project: str, tmp_path: Path, editable: bool
) -> dict[str, str]:
    return {
        "HOLDPOINT_URL": server.url,
        "HOLDPOINT_TOKEN": token,
        "MODEL_URL": model.url,
        "PROJECT": project,
        "STATE_DIR": str(tmp_path / "runs"),
        "RUN_KEY": f"deploy-{project}",
        "TOOL_LOG": str(tmp_path / "deployments.txt"),
        "EDITABLE": "1" if editable else "0",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }


def pending(server: Server, project: str) -> list[dict[str, object]]:
    items: list[dict[str, object]] = server.api("GET", f"/questions?project={project}&status=pending").json()["items"]
    return items


def test_an_approval_answered_after_a_restart_runs_the_tool_with_the_approvers_edit(
    server: Server, agent_token: str, model: MockModel, project: str, tmp_path: Path
) -> None:
    env = flow_env(server, agent_token, model, project, tmp_path, editable=True)
    waiting = subprocess.Popen(
        [sys.executable, str(FLOWS / "openai_agents_flow.py"), "run"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        [question] = eventually("the approval", lambda: pending(server, project), seconds=60)
    finally:
        # The agent dies while it waits for the person.
        waiting.send_signal(signal.SIGKILL)
        waiting.communicate(timeout=30)
    assert question["kind"] == "approval" and question["allow_edit"] is True
    assert question["action"] == {"tool_name": "deploy", "arguments": {"service": "api", "environment": "production"}}
    assert len(model.requests) == 1
    assert list((tmp_path / "runs").glob("*.json")), "the run state is on disk"

    edit = {"service": "api", "environment": "staging"}
    answered = server.api("POST", f"/questions/{question['id']}/answer", json={"value": True, "edited_arguments": edit})
    assert answered.status_code == 200, answered.text

    restarted = run_flow("openai_agents_flow.py", "run", env=env)
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads(restarted.stdout) == {"output": "The tool said: deployed api to staging", "saved": False}
    assert (tmp_path / "deployments.txt").read_text().splitlines() == ["api staging"]
    assert len(model.requests) == 2, "the restarted run went on from its state, without asking the model again"
    assert len(server.api("GET", f"/questions?project={project}").json()["items"]) == 1


def test_a_rejection_reaches_the_model_with_the_comment_and_the_tool_never_runs(
    server: Server, agent_token: str, model: MockModel, project: str, tmp_path: Path
) -> None:
    env = flow_env(server, agent_token, model, project, tmp_path, editable=False)
    asked = run_flow("openai_agents_flow.py", "ask", env=env)
    assert asked.returncode == 0, asked.stderr
    [question_id] = json.loads(asked.stdout)["questions"]
    question = server.api("GET", f"/questions/{question_id}").json()
    assert question["allow_edit"] is False

    rejected = server.api(
        "POST", f"/questions/{question_id}/answer", json={"value": False, "comment": "use the staging cluster"}
    )
    assert rejected.status_code == 200, rejected.text

    finished = run_flow("openai_agents_flow.py", "run", env=env)
    assert finished.returncode == 0, finished.stderr
    output = json.loads(finished.stdout)["output"]
    assert "use the staging cluster" in output and "Do not retry the same call unchanged" in output
    assert model.tool_results() == [output.removeprefix("The tool said: ")]
    assert not (tmp_path / "deployments.txt").exists(), "the rejected tool never ran"
