"""docs/architecture.md stays true: every file, folder and function it names exists where it says.

The map names code as `path` or `path::name` (``name`` may be ``Class.method``) in backticks; a renamed or moved
function then fails this test instead of sending a newcomer to a place that is no longer there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
#: `klog/broker/handlers/produce.py::handle_produce`, `rust/klog-core/src/`, `klog/controller/`
REFERENCE = re.compile(r"`((?:klog|rust|tests|tools|benches|pyspark_klog)/[\w./-]*)(?:::([\w.]+))?`")


def references(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in REFERENCE.finditer(text)]


def defines(source: str, dotted: str) -> bool:
    """Whether the module defines ``dotted`` (a function, class or assignment; ``Class.member`` one level down)."""
    scope: list[ast.stmt] = ast.parse(source).body
    for part in dotted.split("."):
        found = None
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == part:
                found = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == part for t in targets):
                    found = node
        if found is None:
            return False
        scope = found.body if isinstance(found, ast.ClassDef) else []
    return True


def rust_defines(source: str, name: str) -> bool:
    last = name.split(".")[-1]
    return re.search(rf"\b(fn|struct|enum|trait|impl|mod|const|static|type)\s+{re.escape(last)}\b", source) is not None


def missing(text: str) -> list[str]:
    problems = []
    for path, name in references(text):
        target = ROOT / path
        if not target.exists():
            problems.append(f"{path}: no such file or folder")
        elif name is not None:
            source = target.read_text(encoding="utf-8")
            found = rust_defines(source, name) if path.endswith(".rs") else defines(source, name)
            if not found:
                problems.append(f"{path}: defines no {name}")
    return problems


def test_every_path_and_function_the_architecture_map_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(references(text)) >= 40, "the map names the files and functions of the Produce and Fetch paths"
    assert missing(text) == []


@pytest.mark.parametrize("reference, problem", [
    ("`klog/broker/no_such_module.py`", "no such file"),
    ("`klog/broker/server.py::NoSuchThing`", "defines no NoSuchThing"),
    ("`klog/protocol/errors.py::ErrorCode.NO_SUCH_MEMBER`", "defines no"),
])
def test_the_check_finds_a_name_that_moved(reference: str, problem: str) -> None:
    found = missing(f"The produce path starts in {reference}.")
    assert len(found) == 1 and problem in found[0]
