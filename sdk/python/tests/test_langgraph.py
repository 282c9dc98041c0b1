"""``holdpoint_client.langgraph`` with the real LangGraph and its SQLite checkpointer: the graph asks and its process
exits; the person answers through the REST API; a new process resumes the graph, which ends with the answer. Also
the async helpers, approvals inside a node, and a graph without a checkpointer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from holdpoint_client import AsyncHoldpoint, Holdpoint
from holdpoint_client.langgraph import aask, approve, aresume, ask, resume

from .conftest import Server
from .helpers import pending_in, run_flow


def test_a_graph_interrupted_for_a_question_resumes_in_a_new_process_with_the_answer(
    server: Server, agent_token: str, project: str, tmp_path: Path
) -> None:
    counter = tmp_path / "side-effects.txt"
    env = {
        "HOLDPOINT_URL": server.url,
        "HOLDPOINT_TOKEN": agent_token,
        "CHECKPOINT_DB": str(tmp_path / "checkpoints.sqlite"),
        "COUNTER_FILE": str(counter),
        "THREAD_ID": f"ticket-{project}",
        "PROJECT": project,
    }

    started = run_flow("langgraph_flow.py", "start", env=env)
    assert started.returncode == 0, started.stderr
    interrupted = json.loads(started.stdout)
    [question_id] = interrupted["pending"]
    [value] = interrupted["interrupts"]
    assert value["holdpoint"]["question_id"] == question_id
    assert value["holdpoint"]["url"] == f"{server.url}/questions/{question_id}"

    peeked = run_flow("langgraph_flow.py", "peek", env=env)
    assert peeked.returncode == 0, peeked.stderr
    assert json.loads(peeked.stdout) is None, "nothing to resume with before the answer"

    answered = server.api(
        "POST", f"/questions/{question_id}/answer", json={"value": "publish", "comment": "looks good"}
    )
    assert answered.status_code == 200, answered.text

    resumed = run_flow("langgraph_flow.py", "resume", env=env)
    assert resumed.returncode == 0, resumed.stderr
    final = json.loads(resumed.stdout)
    assert final["decision"] == "publish"
    assert final["reviewer"] == "bootstrap"
    assert final["published"] == "publish: Hello, the fix for T-1042 ships on Monday."

    assert counter.read_text().splitlines() == ["drafted"], "the side effect before the ask ran once"
    questions = server.api("GET", f"/questions?project={project}").json()["items"]
    assert [q["id"] for q in questions] == [question_id], "the resumed node did not ask again"
    assert questions[0]["body"] == "Hello, the fix for T-1042 ships on Monday."


class Deployment(TypedDict, total=False):
    environment: str
    outcome: str


def test_an_async_graph_asks_with_aask_and_resumes_with_aresume(
    server: Server, agent_token: str, person: Holdpoint, project: str, tmp_path: Path
) -> None:
    async def scenario() -> dict[str, Any]:
        async with AsyncHoldpoint(server.url, agent_token) as hp:

            async def choose(state: Deployment) -> Deployment:
                result = await aask(
                    hp, "Which environment?", response_type="choice", options=["staging", "prod"], project=project
                )
                return {"environment": str(result.value)}

            builder = StateGraph(Deployment)
            builder.add_node("choose", choose)
            builder.add_edge(START, "choose")
            builder.add_edge("choose", END)
            config: RunnableConfig = {"configurable": {"thread_id": f"async-{project}"}}
            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "async.sqlite")) as checkpointer:
                graph = builder.compile(checkpointer=checkpointer)
                interrupted = await graph.ainvoke({}, config)
                assert "__interrupt__" in interrupted
                assert await aresume(graph, config, hp, wait=False) is None
                [question] = await asyncio.to_thread(pending_in, person, project)
                await asyncio.to_thread(person.answer, question.id, "staging")
                final: dict[str, Any] = await aresume(graph, config, hp, timeout=30)
                return final

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == {"environment": "staging"}


def test_an_approval_in_a_node_gives_the_approvers_edit_and_a_rejection_its_reason(
    hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    def deploy(state: Deployment) -> Deployment:
        result = approve(hp, "deploy", {"environment": state["environment"]}, allow_edit=True, project=project)
        if result.approved:
            return {"outcome": f"deployed to {result.arguments['environment']}"}
        return {"outcome": f"not deployed: {result.reason()}"}

    builder = StateGraph(Deployment)
    builder.add_node("deploy", deploy)
    builder.add_edge(START, "deploy")
    builder.add_edge("deploy", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    approved: RunnableConfig = {"configurable": {"thread_id": f"approve-{project}"}}
    graph.invoke({"environment": "production"}, approved)
    [question] = pending_in(person, project)
    person.answer(question.id, True, edited_arguments={"environment": "staging"})
    assert resume(graph, approved, hp, timeout=30) == {"environment": "production", "outcome": "deployed to staging"}

    rejected: RunnableConfig = {"configurable": {"thread_id": f"reject-{project}"}}
    graph.invoke({"environment": "production"}, rejected)
    [question] = pending_in(person, project)
    person.answer(question.id, False, comment="freeze until Monday")
    final = resume(graph, rejected, hp, timeout=30)
    assert final == {"environment": "production", "outcome": "not deployed: freeze until Monday"}


def test_asking_outside_a_checkpointed_thread_says_what_is_missing(hp: Holdpoint, project: str) -> None:
    def node(state: Deployment) -> Deployment:
        ask(hp, "Anyone?", project=project)
        return {}

    builder = StateGraph(Deployment)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    with pytest.raises(RuntimeError, match="checkpointer"):
        builder.compile().invoke({})
