"""What several test files share: waiting for a condition, answering as a person would, running a flow script."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import uvicorn

from holdpoint_client import Holdpoint, JsonValue, Question

T = TypeVar("T")

FLOWS = Path(__file__).parent / "flows"


def eventually(what: str, check: Callable[[], T | None], seconds: float = 15.0) -> T:
    """Polls ``check`` until it returns something truthy; fails after ``seconds``."""
    until = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > until:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def pending_in(person: Holdpoint, project: str) -> list[Question]:
    return list(person.list_questions(project=project, status="pending").items)


class Answerer:
    """A person who answers the next question of a project as soon as it shows up, in a thread of their own."""

    def __init__(
        self,
        person: Holdpoint,
        project: str,
        value: JsonValue,
        *,
        comment: str | None = None,
        edited_arguments: dict[str, Any] | None = None,
    ) -> None:
        self.answered: Question | None = None
        self.error: BaseException | None = None

        def answer() -> None:
            try:
                question = eventually("a question to answer", lambda: pending_in(person, project))[0]
                self.answered = person.answer(question.id, value, comment=comment, edited_arguments=edited_arguments)
            except BaseException as error:  # reported by join(), in the test's thread
                self.error = error

        self._thread = threading.Thread(target=answer, daemon=True)
        self._thread.start()

    def join(self) -> Question:
        self._thread.join(30)
        if self.error is not None:
            raise self.error
        assert self.answered is not None, "the person never answered"
        return self.answered


def run_flow(script: str, *args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs a flow script in a Python process of its own, as a restarted agent would run."""
    completed = subprocess.run(
        [sys.executable, str(FLOWS / script), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return completed


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example_module(name: str) -> ModuleType:
    """An example file imported as a module (for the agents the examples serve: their ``create_app``)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def serving(make_app: Callable[[str], Any]) -> Iterator[str]:
    """Serves the ASGI app ``make_app(url)`` with uvicorn on a loopback port, in a thread, for as long as the
    block runs; yields its URL (ending in ``/``)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = uvicorn.Server(uvicorn.Config(make_app(url), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    eventually("the agent to listen", lambda: server.started)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)


def start_example(script: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """An example running as a Python process of its own, as its user would run it."""
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script)],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
