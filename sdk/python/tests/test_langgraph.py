"""``holdpoint.langgraph`` with the real LangGraph and its SQLite checkpointer: the graph asks and its process
exits; the person answers through the REST API; a new process resumes the graph, which ends with the answer."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Server
from .helpers import run_flow


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
