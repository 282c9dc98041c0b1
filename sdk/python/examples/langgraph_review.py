"""LangGraph: a graph that drafts a reply, asks a person whether to publish it, and goes on with the answer.

    export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
    python langgraph_review.py   # drafts, asks, exits: the graph is checkpointed in reviews.sqlite
    # answer at http://127.0.0.1:3000/inbox, then
    python langgraph_review.py   # resumes the same thread with the answer and publishes

Needs `pip install "./sdk/python[langgraph]" langgraph-checkpoint-sqlite`.
"""

from __future__ import annotations

from typing import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from holdpoint_client import Holdpoint
from holdpoint_client.langgraph import ask, pending_questions, resume


class Reply(TypedDict, total=False):
    ticket: str
    draft: str
    decision: str


hp = Holdpoint()


def write_draft(state: Reply) -> Reply:
    # Work before the ask lives in a node of its own: the checkpoint marks it done, so a resume does not redo it.
    return {"draft": f"Hello! The fix for {state['ticket']} ships on Monday."}


def review(state: Reply) -> Reply:
    result = ask(
        hp,
        f"Publish the reply to {state['ticket']}?",
        response_type="choice",
        options=["publish", "revise"],
        body=state["draft"],
        project="support",
    )
    return {"decision": str(result.value) if result.outcome == "answered" else "revise"}


def publish(state: Reply) -> Reply:
    print(f"{state['decision']}: {state['draft']}")
    return {}


builder = StateGraph(Reply)
builder.add_node("write_draft", write_draft)
builder.add_node("review", review)
builder.add_node("publish", publish)
builder.add_edge(START, "write_draft")
builder.add_edge("write_draft", "review")
builder.add_edge("review", "publish")
builder.add_edge("publish", END)

config: RunnableConfig = {"configurable": {"thread_id": "ticket-1042"}}
with SqliteSaver.from_conn_string("reviews.sqlite") as checkpointer:
    graph = builder.compile(checkpointer=checkpointer)
    if pending_questions(graph, config):
        resume(graph, config, hp)  # waits for the answer, then runs the graph to its end
    else:
        state = graph.invoke({"ticket": "T-1042"}, config)
        print("waiting for a person:", [i.value["holdpoint"]["url"] for i in state.get("__interrupt__", [])])
