"""The 3-node side-by-side comparison (``make sidebyside-cluster``, benches/sidebyside/cluster.py) end to end,
tiny: a 3-node klog cluster and a 3-node Apache Kafka cluster, one up at a time, every measurement (produce acks=1
and acks=all, consume, end-to-end latency, RSS, catch-up of a restarted replica, failover after a leader's SIGKILL)
taken on both, and its section of performance.md. Proves the harness works, not how fast anything is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benches"))

from sidebyside import cluster  # noqa: E402

#: Both clusters' start (Kafka's three JVMs) and every measurement, on a loaded machine.
SMOKE_TIMEOUT_S = 600


def _session(data: dict, system: str) -> dict:
    return next(s for s in data["sessions"] if s["broker"] == system)


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    if not any((REPO / ".cache" / "kafka" / "libs").glob("kafka_2.13-*.jar")) and "KLOG_KAFKA_LIBS" not in os.environ:
        pytest.fail("Apache Kafka jars missing: run `bash tools/install-peers.sh` (make test does)")
    work = tmp_path_factory.mktemp("sidebyside-cluster")
    env = {**os.environ, "PYTHONPATH": str(REPO / "benches")}
    proc = subprocess.run([sys.executable, "-m", "sidebyside", "--cluster", "3", "--quick", "--runs", "1",
                           "--workdir", str(work), "--docs", str(work / "docs")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((work / "docs" / cluster.JSON_NAME).read_text()), work / "docs"


@pytest.mark.java
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(SMOKE_TIMEOUT_S + 60)
def test_every_cluster_measurement_is_taken_on_both_clusters(cluster_run: tuple[dict, Path]) -> None:
    data, _ = cluster_run
    wanted = [w.id for w in cluster.matrix()] + ["rss", "catch-up", "failover"]
    for system in ("klog", "kafka"):
        session = _session(data, system)
        assert "error" not in session["info"], session["info"]
        assert list(session["results"]) == wanted
        failed = {k: r["error"] for k, r in session["results"].items() if "error" in r}
        assert not failed, (system, failed)
        r = session["results"]
        assert r["produce/java/1024B/16p/rf3/acks=all"]["mb_per_s"] > 0
        assert r["catch-up"]["catch-up: serving to full ISR s"] > 0
        assert r["catch-up"]["catch-up: restart to full ISR s"] >= r["catch-up"]["catch-up: serving to full ISR s"]
        assert 0 < r["failover"]["failover: leader SIGKILL to first ack s"] < 2 * cluster.FAILOVER_LIMIT_S
        assert r["rss"]["node RSS MB (median node)"] > 0
        # one cluster up at a time: no other cluster's CPU was taken during any measurement
        assert session["info"]["together"] is False
        assert all(m["peer_cluster_cpu_s"] == 0 for m in r.values()), r
        # both clusters settled before each measurement, within the bound (a window past it at most)
        assert all(0 < m["settle_s"] <= cluster.SETTLE_LIMIT_S + 2 * cluster.SETTLE_WINDOW_S + 1 for m in r.values()), r


@pytest.mark.java
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(SMOKE_TIMEOUT_S + 60)
def test_performance_md_gets_the_cluster_section_with_a_ratio_per_target(cluster_run: tuple[dict, Path]) -> None:
    data, docs = cluster_run
    text = (docs / "performance.md").read_text()
    section = text[text.index(cluster.SECTION_BEGIN):text.index(cluster.SECTION_END)]
    rows = cluster.headline(data)
    for figure in cluster.TARGETS:
        assert "ratio" in rows[figure], (figure, rows[figure])
        assert f"| {figure} |" in section


def test_a_new_cluster_section_replaces_the_old_one_and_keeps_the_rest(tmp_path: Path) -> None:
    md = tmp_path / "performance.md"
    md.write_text("# Performance\n\nsingle-broker figures\n")
    cluster.write_section(md, f"{cluster.SECTION_BEGIN}\nfirst\n{cluster.SECTION_END}\n")
    cluster.write_section(md, f"{cluster.SECTION_BEGIN}\nsecond\n{cluster.SECTION_END}\n")
    text = md.read_text()
    assert "single-broker figures" in text and "second" in text and "first" not in text
    assert text.count(cluster.SECTION_BEGIN) == 1


def test_headline_figures_are_medians_over_runs_and_ratios_klog_over_kafka() -> None:
    key = "failover: leader SIGKILL to first ack s"

    def session(system: str, run: int, seconds: float) -> dict:
        return {"broker": system, "run": run, "info": {}, "results": {"failover": {key: seconds}}}

    data = {"sessions": [session("klog", 1, 4.0), session("klog", 2, 6.0), session("klog", 3, 20.0),
                         session("kafka", 1, 10.0), session("kafka", 2, 10.0), session("kafka", 3, 10.0)]}
    row = cluster.headline(data)[key]
    assert row == {"klog": 6.0, "kafka": 10.0, "ratio": 0.6}


def test_the_consume_ceiling_is_kafkas_read_time_over_the_consumer_threads_cpu_on_klog() -> None:
    wid = next(w.id for w in cluster.matrix() if w.kind == "consume" and w.tool == "confluent")

    def session(system: str, run: int, seconds: float, thread_cpu_s: float) -> dict:
        return {"broker": system, "run": run, "info": {},
                "results": {wid: {"seconds": seconds, "consumer_thread_cpu_s": thread_cpu_s}}}

    data = {"generated": "now", "runs": 3, "scale": 1.0,
            "sessions": [session("klog", 1, 0.5, 0.40), session("kafka", 1, 0.6, 0.41),
                         session("klog", 2, 0.5, 0.20), session("kafka", 2, 0.8, 0.39),
                         session("klog", 3, 0.5, 0.25), session("kafka", 3, 1.0, 0.40)]}
    assert cluster.consume_ceiling(data) == pytest.approx(4.0)   # median of 1.5, 4.0, 4.0
    section = cluster.markdown(data)
    assert "4.00x" in section and f"| {wid} consumer thread CPU s | 0.25 | 0.40 |" in section
    # figures no session has (results from before the harness recorded them) get no row
    assert "load generator JVM CPU s" not in section


def test_the_section_says_whether_the_clusters_were_up_together_and_older_results_were() -> None:
    def data(**mode: bool) -> dict:
        return {"generated": "now", "runs": 1, "scale": 1.0, **mode,
                "sessions": [{"broker": b, "run": 1, "info": {}, "results": {"rss": {"loadavg_1m": 9.0,
                                                                                   "settle_s": 1.0}}}
                             for b in ("klog", "kafka")]}

    alone, together, older = (cluster.markdown(data(together=False)), cluster.markdown(data(together=True)),
                              cluster.markdown(data()))
    assert "one up at a time" in alone and "minutes apart" in alone and "peer_cluster_cpu_s" not in alone
    for text in (together, older):
        assert "both up at once" in text and "seconds apart" in text and "peer_cluster_cpu_s" in text


def test_both_clusters_get_every_timing_key_klogs_test_clusters_would_add() -> None:
    """KlogCluster adds the test clusters' fast timing under the properties it is given and KafkaCluster does
    not: the comparison must set each of those keys itself, so both run the same settings."""
    from klog.testing.cluster import CLUSTER_TIMING

    props = cluster.cluster_properties()
    assert set(CLUSTER_TIMING) <= set(props), set(CLUSTER_TIMING) - set(props)
    assert props["metadata.log.max.snapshot.interval.ms"] == 3_600_000   # Kafka's default: an hour
