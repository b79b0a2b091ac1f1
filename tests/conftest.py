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


@pytest.fixture(scope="module", params=["klog", "kafka"])
def klog_and_kafka_bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                             ) -> Iterator[str]:
    """One broker of each kind for the module (klog, then Apache Kafka), started from the same properties (the
    defaults, and the module's ``BROKER_PROPERTIES`` where it has them): its bootstrap servers, for a test that
    runs unchanged on both."""
    from klog.testing.kafka import one_broker

    properties = getattr(request.module, "BROKER_PROPERTIES", None)
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), properties) as servers:
        yield servers


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


class FaultyDevice:
    """A real ext4 filesystem on a loop device, mounted at ``mount_point``, whose reads can be made to fail with EIO.

    Device-mapper (a ``linear`` table switched to an ``error`` target, or ``dm-flakey``) is the usual tool; this VM's
    kernel has none (``dmsetup``: "/dev/mapper/control: open failed: No such device", no device-mapper in /proc/misc,
    no module support). :meth:`fail_reads` makes the same fault with the block layer alone: it shrinks the loop
    device under the mounted filesystem (the backing file truncated, ``losetup -c``) so that the region holding the
    given files lies past the device's end; the kernel then fails every read there with EIO ("attempt to access
    beyond end of device"), as a disk with unreadable sectors does. Nothing in the broker is stubbed."""

    def __init__(self, image: Path, device: str, mount_point: Path) -> None:
        self.image, self.device, self.mount_point = image, device, mount_point

    def fail_reads(self, *files: Path) -> None:
        """From now on reading any of ``files`` (and whatever the filesystem placed after them) fails with EIO."""
        import fcntl
        import struct

        os.sync()
        block_size = os.statvfs(self.mount_point).f_bsize
        first = None
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                block = struct.unpack("i", fcntl.ioctl(fd, 1, struct.pack("i", 0)))[0]   # FIBMAP: the first block
                assert block > 0, f"{path} has no data block"
                first = block if first is None else min(first, block)
            finally:
                os.close(fd)
        assert first is not None
        os.truncate(self.image, first * block_size)
        subprocess.run(["losetup", "-c", self.device], check=True, capture_output=True)
        for path in files:   # the cached pages go too: the next read asks the device
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


@pytest.fixture
def faulty_device(tmp_path: Path) -> Iterator[FaultyDevice]:
    """A :class:`FaultyDevice` of 16 MiB (root only: losetup and mount), unmounted and detached after the test
    whatever happened in it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to attach a loop device and mount a filesystem on it")
    image, mount_point = tmp_path / "device.img", tmp_path / "device"
    mount_point.mkdir()
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-b", "1024", str(image)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 filesystem (mkfs.ext4): {made.stderr.strip()}")
    attached = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True)
    if attached.returncode != 0:
        pytest.skip(f"cannot attach a loop device: {attached.stderr.strip()}")
    device = attached.stdout.strip()
    try:
        mounted = subprocess.run(["mount", "-o", "noatime", device, str(mount_point)], capture_output=True, text=True)
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount ext4 from a loop device: {mounted.stderr.strip()}")
        try:
            yield FaultyDevice(image, device, mount_point)
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], check=True)
    finally:
        subprocess.run(["losetup", "-d", device], check=True)


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
