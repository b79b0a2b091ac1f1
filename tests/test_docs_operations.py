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
