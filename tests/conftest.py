"""Fixtures shared by test modules. Imports stay light (Playwright is imported by the fixture that needs it):
every test run loads this file."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM


#: The values a test's broker parameter takes on Apache Kafka's side of a comparison.
KAFKA_SIDES = frozenset({"kafka", "apache", "apache-kafka"})


@pytest.hookimpl(tryfirst=True)  # before the mark plugin deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Apache Kafka's side of every comparison runs nightly (marker long, make test-long): it checks the test
    against Kafka and changes only when the test does, while klog's side, which checks klog, runs on every change
    (CI). A Kafka side is a test parametrized with a broker named in KAFKA_SIDES, or one that takes the session's
    Apache Kafka; tests that start Kafka themselves are marked long where they are written."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        if "apache_kafka_bootstrap" in getattr(item, "fixturenames", ()) or any(
                isinstance(value, str) and value in KAFKA_SIDES for value in params):
            item.add_marker(pytest.mark.long)


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


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs mounted for the test (root only), a disk to fill: log-dir failure tests
    (tests/test_broker_log_dirs.py, tests/test_cluster_jbod.py)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("needs root (CAP_SYS_ADMIN) to mount a 2 MiB tmpfs as a full disk")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:  # e.g. a container without CAP_SYS_ADMIN
        pytest.skip(f"cannot mount a 2 MiB tmpfs as a full disk (needs CAP_SYS_ADMIN): {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)
