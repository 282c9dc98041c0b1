"""What several test files share: waiting for a condition, answering as a person would, running a flow script."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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
