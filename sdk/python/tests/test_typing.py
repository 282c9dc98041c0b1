"""Type checking is part of the suite: the library, its examples and these tests pass ``mypy --strict``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_library_its_examples_and_its_tests_pass_mypy_strict() -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "src/holdpoint_client", "examples", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
