"""The docs' references stay true: every repository path they name exists, every `make` target they tell a reader
to run is in the Makefile, every `python -m` module is there, every `klog.*` name in backticks is a broker or
topic config key or an importable module/attribute, and no page tells a reader to install klog from an index it
is not on."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from klog.broker.config import BROKER_KEYS, TOPIC_KEYS

ROOT = Path(__file__).resolve().parent.parent
#: paths the docs name that a run creates (not in a checkout)
CREATED_BY_RUNS = {"rust/klog-core/fuzz/corpus"}
TOP_DIRS = ("klog", "tests", "benches", "tools", "rust", "docs", "spark", "config", ".github", ".ci", "pyspark_klog")


def _docs() -> list[Path]:
    if not (ROOT / "docs").is_dir():
        pytest.skip("docs/ is not shipped with an installed wheel's tests")  # pragma: no cover
    pages = [ROOT / "README.md", ROOT / "spark" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in pages if p.exists()]


def _code_spans(text: str) -> list[str]:
    """Inline `code` spans and the lines of fenced code blocks."""
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        spans.extend(block.splitlines())
    return spans


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.M))


def test_every_repository_path_the_docs_name_exists() -> None:
    missing = []
    pattern = re.compile(r"(?<![\w./-])((?:%s)/[\w./*<>{}-]*[\w/*])" % "|".join(re.escape(d) for d in TOP_DIRS))
    for page in _docs():
        for span in _code_spans(page.read_text(encoding="utf-8")):
            for path in pattern.findall(span):
                path = path.rstrip("/.")
                if any(ch in path for ch in "<>{}") or path in CREATED_BY_RUNS:   # a placeholder, a run's output
                    continue
                if "*" in path:   # a glob names at least one file
                    if not any(ROOT.glob(path)):
                        missing.append(f"{page.relative_to(ROOT)}: {path}")
                elif not (ROOT / path).exists() and not (page.parent / path).exists():
                    missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, missing


def test_every_test_file_the_docs_name_exists() -> None:
    missing = []
    for page in _docs():
        for span in _code_spans(page.read_text(encoding="utf-8")):
            for name in re.findall(r"(?<![\w/])(test_\w+\.py)", span):
                if not (ROOT / "tests" / name).exists():
                    missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert not missing, missing


def test_every_make_target_the_docs_give_is_in_the_makefile() -> None:
    targets = _makefile_targets()
    unknown = []
    for page in _docs():
        for span in _code_spans(page.read_text(encoding="utf-8")):
            for target in re.findall(r"(?:^|[;&|(]\s*)make\s+([a-z][\w-]*)", span.strip()):
                if target not in targets:
                    unknown.append(f"{page.relative_to(ROOT)}: make {target}")
    assert not unknown, unknown


def test_every_python_module_the_docs_run_exists() -> None:
    missing = []
    for page in _docs():
        for span in _code_spans(page.read_text(encoding="utf-8")):
            for module in re.findall(r"python3? -m ([A-Za-z_][\w.]*)", span):
                if module.startswith("klog"):
                    found = importlib.util.find_spec(module) is not None
                elif module.startswith("sidebyside"):   # run from benches/ (tools/bench-sidebyside.sh)
                    base = ROOT / "benches" / Path(*module.split("."))
                    found = base.with_suffix(".py").exists() or (base / "__main__.py").exists()
                else:
                    found = True   # the standard library's and other tools' modules (venv, pip, pytest, ...)
                if not found:
                    missing.append(f"{page.relative_to(ROOT)}: python -m {module}")
    assert not missing, missing


def _names_a_python_object(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            if importlib.util.find_spec(module_name) is None:
                continue
        except (ImportError, ValueError):
            continue
        obj: object = importlib.import_module(module_name)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_klog_name_in_the_docs_is_a_config_key_or_python_object() -> None:
    """`klog.log.max.open.segment.files` must be a config key, `klog.client.AdminClient` an object; a renamed key or
    class leaves the page wrong otherwise."""
    keys = set(BROKER_KEYS) | set(TOPIC_KEYS)
    unknown = []
    for page in _docs():
        for span in re.findall(r"`(klog\.[A-Za-z_][\w.]*[A-Za-z_0-9])(?:\(\))?`", page.read_text(encoding="utf-8")):
            if span in keys or _names_a_python_object(span):
                continue
            unknown.append(f"{page.relative_to(ROOT)}: {span}")
    assert not unknown, unknown


def test_no_page_installs_klog_from_a_package_index() -> None:
    """klog is on no package index yet (README): `pip install klog` or `klog[spark]` would fetch someone else's
    package or nothing."""
    wrong = []
    for page in _docs():
        for span in _code_spans(page.read_text(encoding="utf-8")):
            if re.search(r"pip install\s+['\"]?klog(\[[\w,]+\])?['\"]?(\s|$)", span):
                wrong.append(f"{page.relative_to(ROOT)}: {span.strip()}")
    assert not wrong, wrong
