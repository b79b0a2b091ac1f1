"""The side-by-side benchmark harness (benches/sidebyside) end to end, tiny: both real brokers, every kind of
workload once with small volumes, the report and its charts. Proves that the full comparison
(``make sidebyside``) works - every load generator against both brokers - not how fast anything is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The whole smoke run (Kafka start-up, both sessions, report) must finish within this on a loaded machine.
SMOKE_TIMEOUT_S = 420

pytestmark = [pytest.mark.java, pytest.mark.slow, pytest.mark.timeout(SMOKE_TIMEOUT_S + 60)]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    if not any((REPO / ".cache" / "kafka" / "libs").glob("kafka_2.13-*.jar")) and "KLOG_KAFKA_LIBS" not in os.environ:
        pytest.fail("Apache Kafka jars missing: run `bash tools/install-peers.sh` (make test does)")
    work = tmp_path_factory.mktemp("sidebyside")
    env = {**os.environ, "PYTHONPATH": str(REPO / "benches")}
    # cwd outside the source tree: the klog under test is the installed one.
    proc = subprocess.run(
        [sys.executable, "-m", "sidebyside", "--quick", "--runs", "1", "--workdir", str(work),
         "--results", str(work / "results.json"), "--docs", str(work / "docs")],
        cwd=work, env=env, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((work / "results.json").read_text()), work


def test_both_brokers_start_and_serve_every_workload(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    sessions = {s["broker"]: s for s in data["sessions"]}
    assert set(sessions) == {"kafka", "klog"}
    for name, s in sessions.items():
        assert "error" not in s["info"], f"{name}: {s['info']['error']}"
        failed = {wid: r["error"] for wid, r in s["results"].items() if "error" in r}
        assert not failed, f"{name} failed workloads: {failed}"
        assert set(s["results"]) == {w["id"] for w in data["workloads"]}


def test_every_kind_of_workload_is_in_the_smoke_run(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    kinds = {(w["kind"], w["tool"]) for w in data["workloads"]}
    assert kinds == {("produce", "java"), ("produce", "confluent"), ("consume", "java"), ("consume", "confluent"),
                     ("e2e", "confluent"), ("produce-latency", "java"), ("connections", "asyncio")}


def test_measurements_are_taken_from_the_broker_processes(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    for s in data["sessions"]:
        assert s["info"]["idle_rss"] > 10 * 2**20, "an RSS this small cannot be a broker process"
        for wid, r in s["results"].items():
            assert r["peak_rss"] >= r["steady_rss"] > 0, wid
            assert r["cpu_s"] >= 0 and r["wall_s"] > 0, wid
            if r.get("mb_per_s") is not None:
                assert r["mb_per_s"] > 0, wid
            if wid.startswith("e2e"):
                assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["p999_ms"], wid


def test_machine_limits_are_measured_in_the_same_run(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    for key in ("page_cache_write_gbps", "loopback_tcp_gbps", "sendfile_loopback_gbps", "crc32c_gbps"):
        assert data["machine"][key] > 0.01, key


def test_report_has_ratios_and_charts(smoke_run: tuple[dict, Path]) -> None:
    _, work = smoke_run
    md = (work / "docs" / "performance.md").read_text()
    assert "## Summary against the milestone targets" in md
    summary = md.split("## Summary against the milestone targets", 1)[1].split("##", 1)[0]
    for metric in ("produce MB/s", "consume MB/s", "end-to-end p99", "peak RSS"):
        row = next(line for line in summary.splitlines() if line.startswith(f"| {metric} |"))
        assert "×" in row.split("|")[2], f"no klog/Kafka ratio for {metric}: {row}"
    for name in ("perf-produce.png", "perf-consume.png", "perf-latency.png", "perf-resources.png",
                 "perf-ratios.png"):
        png = work / "docs" / "img" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"(img/{name})" in md
