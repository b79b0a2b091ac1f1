"""librdkafka's own test suite (its ``tests/test-runner``, built by tools/install-librdkafka-tests.sh into
``.cache/librdkafka/<version>``) run against an existing broker, one test number per process: the runner gives up on
every later test once one times out, and a number (``0045``) selects all of its tests (``0045_subscribe_update``,
``0045_resubscribe_with_regex``, ...). Its verdicts are read from the summary table it prints at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from klog.testing.kafka_tools import kafka_libs_dir, kafka_tool_command

ROOT = Path(__file__).resolve().parent.parent
#: the version tools/install-librdkafka-tests.sh builds
LIBRDKAFKA_VERSION = "2.14.2"
BUILD_DIR = ROOT / ".cache" / "librdkafka" / LIBRDKAFKA_VERSION
#: the runner's summary rows: ``| 0012_produce_consume   |     PASSED |   1.641s | reason``
_SUMMARY_ROW = re.compile(r"^\| (\d{4}_\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|\s*([\d.]+)s\s*\|?\s*(.*)$")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
#: the Apache Kafka CLI scripts some tests run from ``$KAFKA_PATH/bin`` (topics with configs, ACLs), as java tools
_KAFKA_SCRIPTS = {"kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
                  "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
                  "kafka-configs.sh": "kafka.admin.ConfigCommand"}


@dataclass(frozen=True)
class Verdict:
    state: str      # PASSED, FAILED, SKIPPED (by the test itself or the runner's filters), or no verdict
    seconds: float
    reason: str


def build_test_runner() -> Path:
    """The test runner, built first when it is missing (minutes, once per version)."""
    runner = BUILD_DIR / "tests" / "test-runner"
    if not runner.exists():
        subprocess.run(["bash", str(ROOT / "tools" / "install-librdkafka-tests.sh")], check=True, timeout=1200)
    return runner


def kafka_path(directory: Path) -> Path:
    """A ``KAFKA_PATH`` as a Kafka release's: ``bin/`` scripts that run Apache Kafka's Java tools from the project's
    Kafka jars (``kafka-run-class.sh`` runs the suite's own Java clients, e.g. 0098's transactional producer), and
    ``libs/`` those jars."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    libs = kafka_libs_dir()
    if libs is None:
        raise FileNotFoundError("Kafka jars not found: run tools/install-peers.sh (or set KLOG_KAFKA_LIBS)")
    scripts = {script: " ".join(f"'{arg}'" for arg in kafka_tool_command(main_class))
               for script, main_class in _KAFKA_SCRIPTS.items()}
    scripts["kafka-run-class.sh"] = f"java -Xmx256m -cp \"$CLASSPATH:{libs}/*\""
    for script, command in scripts.items():
        (bin_dir / script).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (bin_dir / script).chmod(0o755)
    if not (directory / "libs").exists():
        (directory / "libs").symlink_to(libs)
    return directory


def _runner_directory(workdir: Path) -> Path:
    """The runner's working directory, laid out as the source's ``tests/``: it builds and starts the suite's Java
    clients from there (``make -s java``, ``java/run-class.sh``) and reads ``../src/statistics_schema.json``."""
    cwd = workdir / "tests"
    cwd.mkdir(parents=True, exist_ok=True)
    for link, target in ((cwd / "java", BUILD_DIR / "tests" / "java"), (workdir / "src", BUILD_DIR / "src")):
        if not link.exists():
            link.symlink_to(target)
    (cwd / "Makefile").write_text(".PHONY: java\njava:\n\t$(MAKE) -C java\n")
    return cwd


def run_test_number(number: str, bootstrap: str, workdir: Path, *, timeout_s: float = 600,
                    conf: dict[str, str] | None = None, env: dict[str, str] | None = None,
                    args: tuple[str, ...] = ()) -> tuple[dict[str, Verdict], str]:
    """Run librdkafka's tests numbered ``number`` (its broker tests: ``-L`` leaves out the mock-cluster ones)
    against ``bootstrap``: each test's verdict by name, and the runner's output."""
    runner = build_test_runner()
    cwd = _runner_directory(workdir)
    test_conf = workdir / "test.conf"
    # the timeouts doubled, as librdkafka's own CI runs do (its ACL tests start Kafka's Java CLI, seconds each)
    lines = {"metadata.broker.list": bootstrap, "test.timeout.multiplier": "2", **(conf or {})}
    test_conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    lib = BUILD_DIR / "src", BUILD_DIR / "src-cpp"
    run_env = {**os.environ, "TESTS": number, "RDKAFKA_TEST_CONF": str(test_conf), "TEST_KAFKA_VERSION": "4.3.1",
               "BROKERS": bootstrap, "KAFKA_PATH": str(kafka_path(workdir / "kafka")),
               "LD_LIBRARY_PATH": ":".join(map(str, lib)), **(env or {})}
    try:
        proc = subprocess.run([str(runner), "-L", "-p1", *args], cwd=cwd, env=run_env, capture_output=True,
                              text=True, errors="replace", timeout=timeout_s)
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = f"{exc.stdout or ''}{exc.stderr or ''}\n(timed out after {timeout_s} s)"
    verdicts = {}
    for line in _COLOUR.sub("", out).splitlines():
        match = _SUMMARY_ROW.match(line.strip())
        if match and "negative test flags" not in match.group(4):
            verdicts[match.group(1)] = Verdict(match.group(2), float(match.group(3)), match.group(4).strip())
    return verdicts, out


if __name__ == "__main__":
    # Triage by hand: python tests/librdkafka_support.py BOOTSTRAP OUTDIR NUMBER... runs each number against a running
    # broker and prints its verdicts (LIBRDKAFKA_TEST_ARGS: the runner's options, e.g. "-s noautocreate" or "-Q")
    bootstrap, out_dir = sys.argv[1], Path(sys.argv[2])
    runner_args = tuple(os.environ.get("LIBRDKAFKA_TEST_ARGS", "").split())
    for num in sys.argv[3:]:
        started = time.monotonic()
        found, output = run_test_number(num, bootstrap, out_dir / num, args=runner_args)
        (out_dir / num / "output.log").write_text(output)
        for name, verdict in sorted(found.items()):
            print(f"{name:45s} {verdict.state:8s} {verdict.seconds:8.1f}s {verdict.reason[:150]}", flush=True)
        if not found:
            print(f"{num}: no verdict ({time.monotonic() - started:.0f} s)", flush=True)
