"""``holdpoint_client.a2a`` with the real ``a2a-sdk`` on both sides: the example agent (served with the SDK's own
server) stops its task for input; the watcher asks a person in Holdpoint and the answer completes the same task —
after the watching process was killed and re-attached by the task's id, and as a cancellation when nobody answers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from a2a.client import ClientConfig, create_client
from a2a.helpers import get_message_text, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, GetTaskRequest, Role, Task, TaskState, TaskStatus
from starlette.applications import Starlette

from holdpoint_client import AsyncHoldpoint, Holdpoint
from holdpoint_client.a2a import TaskWatcher, idempotency_key

from .conftest import Server
from .helpers import Answerer, eventually, example_module, kill, serving, start_example

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


class NeedsAuthorization(AgentExecutor):
    """An agent whose task first needs a credential (``auth-required``), then completes with what it was given."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state != TaskState.TASK_STATE_AUTH_REQUIRED:
            asking = "Paste a deploy token for the api service."
            await updater.requires_auth(new_text_message(asking, task_id=task.id, context_id=task.context_id))
            return
        token = context.get_user_input()
        done = new_text_message(f"authorized with {token}", task_id=task.id, context_id=task.context_id)
        await updater.complete(done)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def agent_serving(executor: AgentExecutor, name: str, description: str, url: str) -> Starlette:
    """An A2A agent of ``executor`` served at ``url`` with the SDK's own JSON-RPC server."""
    card = AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
    )
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


def authorizing_agent(url: str) -> Starlette:
    return agent_serving(NeedsAuthorization(), "authorizer", "Needs a credential first.", url)


def test_an_auth_required_task_gets_the_persons_answer_as_its_next_message(
    server: Server, agent_token: str, project: str
) -> None:
    async def run(agent_url: str) -> Task:
        agent = await create_client(agent_url, ClientConfig(streaming=True))
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            watcher = TaskWatcher(agent, hp, project=project)
            task = await watcher.send(new_text_message("Deploy the api service.", role=Role.ROLE_USER))
        await agent.close()
        return task

    with serving(authorizing_agent) as agent_url:
        answerer = Answerer(Holdpoint(server.url, server.admin_token), project, "tok-123")
        task = asyncio.run(run(agent_url))
    question = answerer.join()
    assert question.title == "Paste a deploy token for the api service."
    assert question.context["a2a"]["state"] == "auth-required"
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(task.status.message) == "authorized with tok-123"


class AuthorizedOutOfBand(AgentExecutor):
    """An agent whose task needs a credential (``auth-required``), is given one out of band meanwhile, and goes on
    by itself without a follow-up message (A2A §7.6)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        asking = "Sign in to the deploy service for the api."
        await updater.requires_auth(new_text_message(asking, task_id=task.id, context_id=task.context_id))
        await asyncio.sleep(1.5)
        await updater.complete(new_text_message("deployed with the credential given out of band"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def out_of_band_agent(url: str) -> Starlette:
    return agent_serving(AuthorizedOutOfBand(), "signs-in-elsewhere", "Is given its credential out of band.", url)


def test_a_task_that_goes_on_without_the_answer_withdraws_its_question(
    server: Server, agent_token: str, project: str
) -> None:
    async def run(agent_url: str) -> tuple[Task, TaskWatcher]:
        agent = await create_client(agent_url, ClientConfig(streaming=True))
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            watcher = TaskWatcher(agent, hp, project=project)
            sent = watcher.send(new_text_message("Deploy the api service.", role=Role.ROLE_USER))
            task = await asyncio.wait_for(sent, timeout=30)
        await agent.close()
        return task, watcher

    with serving(out_of_band_agent) as agent_url:
        task, watcher = asyncio.run(run(agent_url))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(task.status.message) == "deployed with the credential given out of band"
    [asked] = watcher.asked
    assert asked.outcome == "cancelled"
    question = server.api("GET", f"/questions/{asked.question_id}").json()
    assert question["title"] == "Sign in to the deploy service for the api."
    assert question["response"]["comment"] == "The agent's task went on without this answer."
    assert pending(server, project) == []


def test_each_request_for_input_of_a_task_is_its_own_question_whatever_its_status_carries() -> None:
    with_message = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED))
    with_message.status.message.CopyFrom(new_text_message("Which region?", role=Role.ROLE_AGENT))
    stamped = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED))
    stamped.status.timestamp.FromJsonString("2026-11-30T12:00:00Z")
    bare = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED))
    later = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED))
    later.history.append(new_text_message("eu-west", role=Role.ROLE_USER))
    keys = [idempotency_key(task) for task in (with_message, stamped, bare, later)]
    assert keys[0] == f"a2a:t1:{with_message.status.message.message_id}"
    assert keys[1] == "a2a:t1:2026-11-30T12:00:00Z"
    assert len(set(keys)) == 4, keys
    assert idempotency_key(bare) == keys[2], "the same request for input is the same question"
