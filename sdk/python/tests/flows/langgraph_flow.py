"""A LangGraph support-reply graph that asks a person before publishing, for the restart test.

    python langgraph_flow.py start    # drafts (a side effect, counted in $COUNTER_FILE), asks, exits interrupted
    python langgraph_flow.py peek     # resumes only if the question is already resolved (it is not: prints null)
    python langgraph_flow.py resume   # waits for the answer and runs the graph to its end

Each command is a process of its own with a fresh graph over the same SQLite checkpoint ($CHECKPOINT_DB).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from holdpoint_client import Holdpoint
from holdpoint_client.langgraph import ask, pending_questions, resume


class Reply(TypedDict, total=False):
    ticket: str
    draft: str
    decision: str
    reviewer: str | None
    published: str


def build(hp: Holdpoint, checkpointer: SqliteSaver) -> Any:
    def write_draft(state: Reply) -> Reply:
        # The side effect before the ask: it must run once, however often the graph is resumed.
        with open(os.environ["COUNTER_FILE"], "a", encoding="utf-8") as counter:
            counter.write("drafted\n")
        return {"draft": f"Hello, the fix for {state['ticket']} ships on Monday."}

    def review(state: Reply) -> Reply:
        result = ask(
            hp,
            f"Publish the reply to {state['ticket']}?",
            response_type="choice",
            options=["publish", "revise"],
            body=state["draft"],
            project=os.environ["PROJECT"],
        )
        return {
            "decision": str(result.value) if result.outcome == "answered" else "revise",
            "reviewer": result.answered_by,
        }

    def publish(state: Reply) -> Reply:
        return {"published": f"{state['decision']}: {state['draft']}"}

    graph = StateGraph(Reply)
    graph.add_node("write_draft", write_draft)
    graph.add_node("review", review)
    graph.add_node("publish", publish)
    graph.add_edge(START, "write_draft")
    graph.add_edge("write_draft", "review")
    graph.add_edge("review", "publish")
    graph.add_edge("publish", END)
    return graph.compile(checkpointer=checkpointer)


def main(command: str) -> None:
    config = {"configurable": {"thread_id": os.environ["THREAD_ID"]}}
    with Holdpoint(os.environ["HOLDPOINT_URL"], os.environ["HOLDPOINT_TOKEN"]) as hp:
        with SqliteSaver.from_conn_string(os.environ["CHECKPOINT_DB"]) as checkpointer:
            graph = build(hp, checkpointer)
            if command == "start":
                state = graph.invoke({"ticket": "T-1042"}, config)
                interrupts = [i.value for i in state.get("__interrupt__", [])]
                print(json.dumps({"interrupts": interrupts, "pending": pending_questions(graph, config)}))
            elif command == "peek":
                print(json.dumps(resume(graph, config, hp, wait=False)))
            elif command == "resume":
                print(json.dumps(resume(graph, config, hp, timeout=30)))


if __name__ == "__main__":
    main(sys.argv[1])
