"""docs/operations.md's configuration reference is what the broker's config table generates (no drift)."""

from __future__ import annotations

from pathlib import Path

import pytest

from klog.broker.config import BROKER_KEYS, TOPIC_KEYS
from klog.broker.config_doc import reference, rewrite

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"


def test_the_config_reference_matches_the_config_table() -> None:
    if not DOC.exists():
        pytest.skip("docs/ is not shipped with an installed wheel's tests")  # pragma: no cover
    text = DOC.read_text(encoding="utf-8")
    assert rewrite(text) == text, "stale: run python -m klog.broker.config_doc docs/operations.md"


def test_the_reference_lists_every_broker_and_topic_key() -> None:
    generated = reference()
    for name in [*BROKER_KEYS, *TOPIC_KEYS]:
        assert f"| `{name}` |" in generated


def test_images_and_links_in_the_docs_point_to_files() -> None:
    """operations.md, metrics.md, console.md and the README link screenshots and each other: none is missing."""
    import re

    root = DOC.parent.parent
    if not DOC.exists():
        pytest.skip("docs/ is not shipped with an installed wheel's tests")  # pragma: no cover
    missing = []
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if "://" not in target and not (doc.parent / target).exists():
                missing.append(f"{doc.relative_to(root)}: {target}")
    assert not missing, missing
    operations = DOC.read_text(encoding="utf-8")
    assert "](img/metrics-prometheus.png)" in operations and "](img/console-overview.png)" in operations
