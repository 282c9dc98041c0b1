"""``holdpoint_client.a2a`` with the real ``a2a-sdk`` on both sides: the example agent (served with the SDK's own
server) stops its task for input; the watcher asks a person in Holdpoint and the answer completes the same task —
after the watching process was killed and re-attached by the task's id, and as a cancellation when nobody answers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from a2a.client import ClientConfig, create_client
from a2a.helpers import new_text_message
from a2a.types import GetTaskRequest, Role, Task, TaskState

from holdpoint_client import AsyncHoldpoint
from holdpoint_client.a2a import TaskWatcher

from .conftest import Server
from .helpers import eventually, example_module, kill, serving, start_example

AGENT = example_module("a2a_agent")


def pending(server: Server, project: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = server.api("GET", f"/questions?project={project}&status=pending").json()["items"]
    return items


async def task_of(agent_url: str, task_id: str) -> Task:
    agent = await create_client(agent_url, ClientConfig(streaming=True))
    try:
        return await agent.get_task(GetTaskRequest(id=task_id))
    finally:
        await agent.close()


def test_the_example_answers_the_tasks_request_for_input_on_the_same_task_after_a_restart(
    server: Server, agent_token: str, tmp_path: Path
) -> None:
    with serving(AGENT.create_app) as agent_url:
        env = {"HOLDPOINT_SERVER": server.url, "HOLDPOINT_TOKEN": agent_token, "A2A_URL": agent_url}
        first = start_example("a2a_deploy.py", tmp_path, env)
        try:
            [question] = eventually("the question", lambda: pending(server, "a2a-demo"), seconds=60)
        finally:
            kill(first)  # the watcher dies while the person decides; the task lives on with the agent
        task_id = (tmp_path / "a2a-task.txt").read_text()
        assert question["title"] == "Which environment should I deploy the api service to: staging or production?"
        assert question["response_type"] == "text" and question["kind"] == "blocking"
        waiting = asyncio.run(task_of(agent_url, task_id))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert question["context"]["a2a"] == {
            "task_id": task_id,
            "context_id": waiting.context_id,
            "state": "input-required",
        }

        second = start_example("a2a_deploy.py", tmp_path, env)
        answered = server.api("POST", f"/questions/{question['id']}/answer", json={"value": "staging"})
        assert answered.status_code == 200, answered.text
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        assert out == "TASK_STATE_COMPLETED deployed api to staging\n"

        done = asyncio.run(task_of(agent_url, task_id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        answer = [m for m in done.history if m.role == Role.ROLE_USER][-1]
        assert [p.text for p in answer.parts] == ["staging"]
        assert answer.task_id == task_id and answer.context_id == waiting.context_id
        assert answer.metadata["holdpoint"]["question_id"] == question["id"]
    asked = server.api("GET", "/questions?project=a2a-demo").json()["items"]
    assert [q["id"] for q in asked if q["context"]["a2a"]["task_id"] == task_id] == [question["id"]]
    assert not (tmp_path / "a2a-task.txt").exists()


def test_a_request_for_input_nobody_answers_in_time_cancels_the_task(
    server: Server, agent_token: str, project: str
) -> None:
    async def run(agent_url: str) -> tuple[Task, TaskWatcher]:
        agent = await create_client(agent_url, ClientConfig(streaming=True))
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            watcher = TaskWatcher(agent, hp, project=project, timeout_seconds=1)
            task = await watcher.send(new_text_message("Deploy the api service.", role=Role.ROLE_USER))
        await agent.close()
        return task, watcher

    with serving(AGENT.create_app) as agent_url:
        task, watcher = asyncio.run(run(agent_url))
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        assert asyncio.run(task_of(agent_url, task.id)).status.state == TaskState.TASK_STATE_CANCELED
    [asked] = watcher.asked
    assert asked.outcome == "expired"
