"""The Python examples of docs/integrations.md that need no agent of their own run here as their user runs them: a
process of their own against the real server, people answering through the API, and for the OpenAI Agents example
the mock model on loopback. (The AG-UI and A2A examples run in ``test_ag_ui.py`` and ``test_a2a.py``.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .conftest import Server
from .helpers import eventually, kill, start_example
from .mock_model import MockModel


def pending(server: Server, project: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = server.api("GET", f"/questions?project={project}&status=pending").json()["items"]
    return items


def example_env(server: Server, token: str) -> dict[str, str]:
    return {"HOLDPOINT_SERVER": server.url, "HOLDPOINT_TOKEN": token}


def waiting(
    server: Server, project: str, what: str, matches: Callable[[dict[str, Any]], bool] = lambda _: True
) -> dict[str, Any]:
    """The first pending question of `project` that `matches`, once it is asked."""

    def first() -> dict[str, Any] | None:
        return next((q for q in pending(server, project) if matches(q)), None)

    return eventually(what, first, 60)


def titled(title: str) -> Callable[[dict[str, Any]], bool]:
    return lambda question: bool(question["title"] == title)


def asking_to_call(tool_name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda question: bool((question.get("action") or {}).get("tool_name") == tool_name)


def answer(server: Server, question: dict[str, Any], body: dict[str, Any]) -> None:
    answered = server.api("POST", f"/questions/{question['id']}/answer", json=body)
    assert answered.status_code == 200, answered.text


def test_the_quickstart_asks_gates_a_call_and_guards_a_function(
    server: Server, agent_token: str, tmp_path: Path
) -> None:
    env = example_env(server, agent_token)
    example = start_example("quickstart.py", tmp_path, env)
    try:
        title = "Which region should the new cluster go to?"
        region = waiting(server, "quickstart", title, titled(title))
        answer(server, region, {"value": "us-east"})
        assert [option["value"] for option in region["options"]] == ["eu-west", "us-east"]
        cluster = waiting(server, "quickstart", "the cluster's approval", lambda q: bool(q["kind"] == "approval"))
        assert cluster["action"] == {"tool_name": "create_cluster", "arguments": {"region": "us-east", "nodes": 3}}
        answer(server, cluster, {"value": True, "edited_arguments": {"region": "us-east", "nodes": 5}})
        snapshot = waiting(server, "quickstart", "the snapshot's approval", asking_to_call("delete_snapshot"))
        assert snapshot["action"]["arguments"] == {"snapshot_id": "snap-042"}
        answer(server, snapshot, {"value": False, "comment": "we restore from it"})
        out, err = example.communicate(timeout=60)
    finally:
        if example.poll() is None:
            kill(example)
    assert example.returncode == 0, err
    assert out.splitlines() == [
        "region: us-east (answered)",
        "creating the cluster with {'nodes': 5, 'region': 'us-east'}",
        "kept the snapshot: we restore from it",
    ]


def test_the_langgraph_example_exits_while_it_waits_and_a_second_run_publishes_the_answer(
    server: Server, agent_token: str, tmp_path: Path
) -> None:
    env = example_env(server, agent_token)
    first = start_example("langgraph_review.py", tmp_path, env)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.startswith("waiting for a person: ['http"), out
    assert (tmp_path / "reviews.sqlite").exists(), "the graph is checkpointed"
    title = "Publish the reply to T-1042?"
    question = waiting(server, "support", title, titled(title))
    answer(server, question, {"value": "publish"})
    assert question["body"] == "Hello! The fix for T-1042 ships on Monday."
    second = start_example("langgraph_review.py", tmp_path, env)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert out.splitlines() == ["publish: Hello! The fix for T-1042 ships on Monday."]


def test_the_openai_agents_example_survives_being_killed_while_it_waits_and_runs_the_edited_call(
    server: Server, agent_token: str, tmp_path: Path
) -> None:
    model = MockModel("deploy", {"service": "api", "environment": "production"})
    try:
        env = {**example_env(server, agent_token), "OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "sk-test-not-used"}
        first = start_example("openai_agents_deploy.py", tmp_path, env)
        try:
            question = waiting(server, "deploys", "the deploy's approval")
        finally:
            kill(first)  # the agent's process dies while a person decides
        proposed = {"service": "api", "environment": "production"}
        assert question["action"] == {"tool_name": "deploy", "arguments": proposed}
        assert question["allow_edit"] is True
        assert list((tmp_path / "runs").iterdir()), "the run state was saved before anybody was asked"

        second = start_example("openai_agents_deploy.py", tmp_path, env)
        edited = {"service": "api", "environment": "staging"}
        answer(server, question, {"value": True, "edited_arguments": edited})
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        assert out.strip() == "The tool said: deployed api to staging"
        assert len(model.requests) == 2, "the restarted run asked the model only for its answer"
        assert not pending(server, "deploys"), "the restart asked nothing again"
    finally:
        model.close()


def test_the_mcp_task_example_polls_its_task_across_a_restart_until_a_person_answers(
    server: Server, agent_token: str, tmp_path: Path
) -> None:
    env = example_env(server, agent_token)
    first = start_example("mcp_task.py", tmp_path, env)
    try:
        title = "Ship release 2.4 today?"
        question = waiting(server, "mcp-tasks", title, titled(title))
        eventually("the task's id kept", lambda: (tmp_path / "mcp-task.txt").exists(), 30)
    finally:
        kill(first)  # the agent's process dies while a person decides
    assert (tmp_path / "mcp-task.txt").read_text() == question["id"], "the task's id is its question's"

    second = start_example("mcp_task.py", tmp_path, env)
    try:
        assert second.stdout is not None
        assert second.stdout.readline().strip() == f"task {question['id']}: input_required"
        answer(server, question, {"value": True, "comment": "go"})
        out, err = second.communicate(timeout=60)
    finally:
        if second.poll() is None:
            kill(second)
    assert second.returncode == 0, err
    lines = out.splitlines()
    assert lines[-2] == f"task {question['id']}: completed", lines
    result = json.loads(lines[-1])
    assert (result["outcome"], result["value"], result["comment"]) == ("answered", True, "go")
    assert not (tmp_path / "mcp-task.txt").exists(), "a finished task leaves nothing behind"
    asked = server.api("GET", "/questions?project=mcp-tasks").json()["items"]
    assert [q["id"] for q in asked] == [question["id"]], "the restart asked nothing again"
