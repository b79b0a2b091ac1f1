"""The side-by-side benchmark harness (benches/sidebyside) end to end, tiny: both real brokers up at once,
every kind of workload measured on one then the other (paired), small volumes, the report and its charts.
Proves that the full comparison (``make sidebyside``) works - every load generator against both brokers,
paired measurements, ``--only`` - not how fast anything is."""

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
#: The idle broker of a pair may use at most this many cores in the background (Kafka's idle JVM: heartbeats,
#: GC, JIT) - more would load the machine the other broker is measured on.
IDLE_PEER_MAX_CORES = 0.25

pytestmark = [pytest.mark.java, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(SMOKE_TIMEOUT_S + 60)]


def _sidebyside(work: Path, *args: str) -> dict:
    if not any((REPO / ".cache" / "kafka" / "libs").glob("kafka_2.13-*.jar")) and "KLOG_KAFKA_LIBS" not in os.environ:
        pytest.fail("Apache Kafka jars missing: run `bash tools/install-peers.sh` (make test does)")
    env = {**os.environ, "PYTHONPATH": str(REPO / "benches")}
    # cwd outside the source tree: the klog under test is the installed one.
    proc = subprocess.run(
        [sys.executable, "-m", "sidebyside", "--quick", *args, "--workdir", str(work),
         "--results", str(work / "results.json"), "--docs", str(work / "docs")],
        cwd=work, env=env, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((work / "results.json").read_text())


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    work = tmp_path_factory.mktemp("sidebyside")
    return _sidebyside(work, "--runs", "1"), work


@pytest.fixture(scope="module")
def only_consume_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The command that failed before ``--only`` pulled in a consume workload's producer; two runs, so the
    order of each pair flips between them."""
    return _sidebyside(tmp_path_factory.mktemp("sidebyside-only"), "--runs", "2",
                       "--only", "consume/confluent/1024B/16p")


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


def test_consume_workloads_record_the_load_generators_own_cpu(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    for s in data["sessions"]:
        for w in data["workloads"]:
            r = s["results"][w["id"]]
            if (w["kind"], w["tool"]) == ("consume", "confluent"):
                # one thread's CPU over the read can exceed its wall time only by the clocks' granularity
                assert 0 < r["consumer_thread_cpu_s"] <= r["consumer_process_cpu_s"] + 0.01, r
                assert 0 < r["consumer_thread_busy"] <= 1.05, r
                assert 0 <= r["consumer_thread_runqueue_s"] < r["seconds"] + 0.01, r
            elif (w["kind"], w["tool"]) == ("consume", "java"):
                assert r["jvm_cpu_s"] > r["fetch_s"] >= 0, r   # a JVM's start alone costs more CPU than nothing


def test_machine_limits_are_measured_in_the_same_run(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    for key in ("page_cache_write_gbps", "loopback_tcp_gbps", "sendfile_loopback_gbps", "crc32c_gbps"):
        assert data["machine"][key] > 0.01, key
    # the kernel's CPU per GB moved: a floor for any broker's, so above zero and below a produce's own cost
    for key in ("produce_floor_cpu_s_per_gb", "consume_floor_cpu_s_per_gb"):
        assert 0 < data["machine"][key] < 20, key


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


def _measurements(data: dict) -> list[tuple[float, float, str, str, int]]:
    """(start, end, workload, broker, run) of every measurement, in the order they ran."""
    out = []
    for s in data["sessions"]:
        for wid, r in s["results"].items():
            out.append((r["started_unix_s"], r["started_unix_s"] + r["wall_s"], wid, s["broker"], s["run"]))
    return sorted(out)


def test_each_workload_is_measured_on_both_brokers_back_to_back(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    assert data["mode"] == "paired"
    seq = _measurements(data)
    assert len(seq) == 2 * len(data["workloads"])
    # Consecutive measurements form pairs: the same workload, both brokers, nothing else in between ...
    for first, second in zip(seq[::2], seq[1::2]):
        assert first[2] == second[2] and {first[3], second[3]} == {"kafka", "klog"}, (first, second)
        assert first[1] <= second[0], f"{first[2]}: the two measurements of a pair overlapped"
    # ... both brokers were up at once (the second pair member started while the first broker still served) ...
    pids = {s["broker"]: s["info"]["pid"] for s in data["sessions"]}
    assert pids["kafka"] != pids["klog"]
    # ... and who goes first alternates from one workload to the next.
    firsts = [a[3] for a in seq[::2]]
    assert all(a != b for a, b in zip(firsts, firsts[1:])), firsts


def test_every_measurement_records_the_machine_load_and_the_idle_broker(smoke_run: tuple[dict, Path]) -> None:
    data, _ = smoke_run
    peer_cores = []
    for s in data["sessions"]:
        assert s["info"]["idle_cpu_cores"] >= 0, s["broker"]
        for wid, r in s["results"].items():
            assert r["loadavg_1m"] >= 0 and r["other_runnable"] >= 0 and r["own_runnable"] >= 0, wid
            assert r["runqueue_wait_s"] >= 0, wid
            assert r["peer_cpu_s"] >= 0, wid
            peer_cores.append(r["peer_cpu_s"] / r["wall_s"])
    peer_cores.sort()
    assert peer_cores[len(peer_cores) // 2] < IDLE_PEER_MAX_CORES, f"the idle broker was busy: {peer_cores}"


def test_report_shows_the_load_of_every_workload_and_a_generated_analysis(smoke_run: tuple[dict, Path]) -> None:
    data, work = smoke_run
    md = (work / "docs" / "performance.md").read_text()
    summary = md.split("## Summary against the milestone targets", 1)[1].split("## ", 1)[0]
    assert "Machine load over the measurements (" in summary
    assert "1-minute load average" in summary
    load = md.split("## Machine load during each workload", 1)[1].split("\n## ", 1)[0]
    for w in data["workloads"]:
        assert f"| {w['id']} |" in load, w["id"]
    analysis = md.split("## What limits klog (from this run's figures)", 1)[1].split("\n## ", 1)[0]
    assert "**Produce throughput**: klog/Kafka" in analysis and "**Consume throughput**: klog/Kafka" in analysis


@pytest.mark.long   # a second smoke run (about 2 minutes); the first one stays in CI
def test_only_a_consume_workload_runs_its_producer_first(only_consume_run: dict) -> None:
    data = only_consume_run
    assert [w["id"] for w in data["workloads"]] == ["produce/java/1024B/16p/acks=1", "consume/confluent/1024B/16p"]
    assert len(data["sessions"]) == 4
    for s in data["sessions"]:
        assert "error" not in s["info"], s["info"]
        failed = {wid: r["error"] for wid, r in s["results"].items() if "error" in r}
        assert not failed, f"{s['broker']} run {s['run']}: {failed}"
        assert s["results"]["consume/confluent/1024B/16p"]["records"] >= data["workloads"][1]["records"]


@pytest.mark.long   # a second smoke run (about 2 minutes); the first one stays in CI
def test_pair_order_flips_between_runs(only_consume_run: dict) -> None:
    seq = _measurements(only_consume_run)
    first = {(wid, run): broker for _, _, wid, broker, run in reversed(seq)}  # earliest of each pair wins
    for w in only_consume_run["workloads"]:
        assert first[(w["id"], 1)] != first[(w["id"], 2)], w["id"]
