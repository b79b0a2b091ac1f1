"""Fixtures shared by test modules. Imports stay light (Playwright is imported by the fixture that needs it):
every test run loads this file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import CHROMIUM


@pytest.fixture
def headless_chromium() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (a ``Browser``), one per test: the web console's
    pages (tests/test_console.py) and Prometheus's graph page (tests/test_metrics.py).

    Per test, not per session: Playwright's sync API keeps an asyncio loop marked running in the main thread
    while it is open, and every later test that calls ``asyncio.run`` would then fail."""
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


@pytest.fixture(scope="module", params=["apache-kafka", "klog"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """One broker's address, Apache Kafka's and then klog's: a module whose tests take it runs them against both,
    so they check Kafka's behaviour and not a guess of it."""
    if request.param == "apache-kafka":
        return str(request.getfixturevalue("apache_kafka_bootstrap"))
    return str(request.getfixturevalue("klog_broker").bootstrap_servers)
