"""An A2A agent whose task stops to ask which environment to deploy to, served with the a2a-sdk's own server.

    python a2a_agent.py   # serves http://127.0.0.1:9999 (A2A_PORT to change it)

Its tasks live in memory as long as it runs: a client that stops and starts again finds them by id. No model and no
API key: the agent's "work" is a line of text. Needs `pip install "./sdk/python[a2a]" uvicorn`.
"""

from __future__ import annotations

import os

from a2a.helpers import new_task_from_user_message, new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


class Deployer(AgentExecutor):
    """Asked to deploy a service, it asks back where to; told, it deploys there and completes the task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            question = "Which environment should I deploy the api service to: staging or production?"
            await updater.requires_input(new_text_message(question, context_id=task.context_id, task_id=task.id))
            return
        environment = context.get_user_input().strip()
        await updater.add_artifact([new_text_artifact("deployment", f"deployed api to {environment}").parts[0]])
        done = new_text_message(f"Deployed api to {environment}.", context_id=task.context_id, task_id=task.id)
        await updater.complete(done)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        assert task is not None
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def create_app(url: str) -> Starlette:
    """The agent as an ASGI app: its card at /.well-known/agent-card.json, JSON-RPC at /."""
    card = AgentCard(
        name="deployer",
        description="Deploys services, asking where to first.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="deploy", name="Deploy", description="Deploys a service", tags=["deploy"])],
    )
    handler = DefaultRequestHandler(agent_executor=Deployer(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


if __name__ == "__main__":
    import uvicorn

    port = int(os.environ.get("A2A_PORT", "9999"))
    uvicorn.run(create_app(f"http://127.0.0.1:{port}/"), host="127.0.0.1", port=port)
