"""Fixtures shared by test modules. Imports stay light (Playwright is imported by the fixture that needs it):
every test run loads this file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import CHROMIUM


@pytest.fixture(scope="session")
def headless_chromium() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (a ``Browser``), one for the session: the web console's
    pages (tests/test_console.py) and Prometheus's graph page (tests/test_metrics.py). Each test opens its own
    pages and closes them."""
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (bash tools/install-peers.sh)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        # Debian's Chromium, never a browser Playwright downloads
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()
