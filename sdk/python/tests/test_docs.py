"""The examples in docs/integrations.md are the files in sdk/python/examples/, which the typing test checks."""

from __future__ import annotations

import re
from pathlib import Path

PYTHON_SDK = Path(__file__).resolve().parent.parent
INTEGRATIONS = PYTHON_SDK.parent.parent / "docs" / "integrations.md"


def test_each_python_example_of_the_integrations_page_is_an_example_file_as_it_is() -> None:
    page = INTEGRATIONS.read_text(encoding="utf-8")
    shown = re.findall(r"<!-- (sdk/python/examples/\S+) -->\n```python\n(.*?)\n```", page, flags=re.DOTALL)
    assert {name for name, _ in shown} == {
        f"sdk/python/examples/{p.name}" for p in (PYTHON_SDK / "examples").glob("*.py")
    }
    for name, code in shown:
        assert code == (PYTHON_SDK.parent.parent / name).read_text(encoding="utf-8").rstrip("\n"), f"{name} differs"
