"""The side-by-side harness's own logic, without brokers: which workloads ``--only`` selects and in which
order, who goes first in a pair, and how the report turns paired measurements into ratios and load flags.
The end-to-end run against both real brokers is tests/test_sidebyside_smoke.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))

from sidebyside import cluster  # noqa: E402
from sidebyside.report import (AFTER_MEMORY_HEADING, MEMORY_NOTES_BEGIN, MEMORY_NOTES_END,  # noqa: E402
                               SHARE_GROUPS_BEGIN, SHARE_GROUPS_END, TRANSACTIONS_BEGIN, TRANSACTIONS_END, Results,
                               compose, headline_ratios, limits_analysis)
from sidebyside.runner import pair_order  # noqa: E402
from sidebyside.workloads import matrix, select  # noqa: E402


def test_only_a_consume_workload_brings_the_produce_that_fills_its_topic_first() -> None:
    ids = [w.id for w in select(matrix(1.0), ["consume/confluent/1024B/16p"])]
    assert ids == ["produce/java/1024B/16p/acks=1", "consume/confluent/1024B/16p"]


def test_only_keeps_matrix_order_and_adds_each_producer_once() -> None:
    ids = [w.id for w in select(matrix(1.0), ["consume/", "e2e/"])]
    producers = [i for i in ids if i.startswith("produce/")]
    assert len(producers) == len(set(producers)) == 5  # 4 sizes x partitions, plus 1,000 partitions
    for i, wid in enumerate(ids):
        if wid.startswith("consume/"):
            size, parts = wid.split("/")[2:4]
            assert f"produce/java/{size}/{parts}/acks=1" in ids[:i], wid
    assert [i for i in ids if i.startswith("e2e/")] == ["e2e/confluent/1024B/16p/acks=1",
                                                        "e2e/confluent/1024B/16p/acks=all"]


def test_only_without_a_match_selects_nothing_and_no_only_selects_all() -> None:
    assert select(matrix(1.0), ["no-such-workload"]) == []
    assert select(matrix(1.0), []) == matrix(1.0)


def test_pair_order_alternates_per_workload_and_per_run() -> None:
    brokers = ["kafka", "klog"]
    run1 = [pair_order(brokers, 1, i)[0] for i in range(4)]
    run2 = [pair_order(brokers, 2, i)[0] for i in range(4)]
    assert run1 == ["kafka", "klog", "kafka", "klog"]
    assert run2 == ["klog", "kafka", "klog", "kafka"]
    assert sorted(pair_order(brokers, 3, 5)) == brokers


def _data(pairs: list[tuple[float, float, float]], cpus: int = 2) -> dict:
    """Three runs of one produce workload: (kafka MB/s, klog MB/s, other processes' runnable threads)."""
    wid = "produce/java/100B/1p/acks=1"
    sessions = []
    for run, (k, g, other) in enumerate(pairs, start=1):
        for broker, mbps in (("kafka", k), ("klog", g)):
            sessions.append({"broker": broker, "run": run, "info": {"idle_rss": 100.0 if broker == "kafka" else 10.0},
                             "results": {wid: {"mb_per_s": mbps, "cpu_s": 1.0, "wall_s": 2.0, "runqueue_wait_s": 0.1,
                                               "cpu_s_per_gb": 1.0, "peak_rss": 2**20, "steady_rss": 2**20,
                                               "loadavg_1m": other + 1.5, "other_runnable": other,
                                               "started_unix_s": 1000.0 * run + (broker == "klog") * 3}}})
    return {"mode": "paired", "runs": len(pairs), "machine": {"cpus": cpus},
            "workloads": [{"id": wid, "kind": "produce"}], "sessions": sessions}


def test_a_ratio_is_the_median_of_the_per_run_pair_ratios_not_the_ratio_of_medians() -> None:
    # Pair ratios 2.0, 0.5, 1.5 -> median 1.5; the medians (kafka 100, klog 50) would say 0.5.
    res = Results(_data([(10, 20, 0), (100, 50, 0), (200, 300, 0)]))
    assert res.ratio("produce/java/100B/1p/acks=1", "mb_per_s") == pytest.approx(1.5)
    assert headline_ratios(res)["produce MB/s"][0] == pytest.approx(1.5)
    assert res.gap_s("produce/java/100B/1p/acks=1").median == pytest.approx(3.0)


def test_a_pair_measured_under_more_other_load_than_cores_is_marked_unreliable() -> None:
    res = Results(_data([(10, 20, 0.5), (10, 20, 2.5), (10, 20, 1.0)], cpus=2))
    wid = "produce/java/100B/1p/acks=1"
    assert res.loaded_runs(wid) == [2]
    assert res.pair_cell(wid, "mb_per_s") == "2.00× (2.00–2.00) †1/3"
    assert "1 of them with a pair measured under load" in headline_ratios(res)["produce MB/s"][1]
    assert not Results(_data([(10, 20, 0.5)] * 3)).loaded_runs(wid)


def test_the_limits_analysis_says_where_klog_is_behind_from_the_figures() -> None:
    text = "\n".join(limits_analysis(Results(_data([(20, 10, 0)] * 3))))
    assert "**Produce throughput**: klog/Kafka 0.50×" in text
    assert "behind in 1" in text
    # 1.0 CPU s over 2.0 s is 0.5 cores busy, 0.1 s waited per CPU s: neither CPU-bound nor short of CPU.
    assert "`java/100B/1p/acks=1` 0.50×: not limited by broker CPU" in text


def test_a_new_report_keeps_the_hand_kept_sections_and_the_notes_after_the_cluster_section() -> None:
    old = (f"# old generated figures\n\n{TRANSACTIONS_BEGIN}\ntxn notes\n{TRANSACTIONS_END}\n\n"
           f"{SHARE_GROUPS_BEGIN}\nshare notes\n{SHARE_GROUPS_END}\n\n"
           f"{cluster.SECTION_BEGIN}\nold cluster run\n{cluster.SECTION_END}\n\nHow to read the runs\n\n"
           "## 3-node cluster: the control plane\ncontrol plane figures\n")
    new_cluster = f"{cluster.SECTION_BEGIN}\nnew cluster run\n{cluster.SECTION_END}\n"
    text = compose("# new generated figures\n", old, new_cluster)
    assert "old generated figures" not in text and "old cluster run" not in text
    order = ["# new generated figures", "txn notes", "share notes", "new cluster run", "How to read the runs",
             "control plane figures"]
    positions = [text.index(piece) for piece in order]
    assert positions == sorted(positions)
    assert text.count(cluster.SECTION_END) == 1


def test_a_new_report_keeps_the_memory_notes_at_the_end_of_its_memory_section() -> None:
    notes = f"{MEMORY_NOTES_BEGIN}\nwhere the RSS goes\n{MEMORY_NOTES_END}\n"
    old = f"# old\n\n## Memory and CPU\n\nold table\n\n{notes}\n{AFTER_MEMORY_HEADING}\n\nold load\n"
    text = compose(f"# new\n\n## Memory and CPU\n\nnew table\n\n{AFTER_MEMORY_HEADING}\n\nnew load\n", old, "")
    assert "old table" not in text and text.count("where the RSS goes") == 1
    order = ["new table", "where the RSS goes", AFTER_MEMORY_HEADING, "new load"]
    positions = [text.index(piece) for piece in order]
    assert positions == sorted(positions)


def test_consume_is_judged_on_its_geometric_mean_and_on_its_slowest_workload() -> None:
    ids = ["consume/java/100B/1p", "consume/confluent/1024B/16p"]
    sessions = [{"broker": broker, "run": 1, "info": {},
                 "results": {wid: {"mb_per_s": mbps, "other_runnable": 0.0, "started_unix_s": 1000.0}
                             for wid, mbps in zip(ids, rates)}}
                for broker, rates in (("kafka", (100.0, 100.0)), ("klog", (200.0, 80.0)))]
    heads = headline_ratios(Results({"mode": "paired", "runs": 1, "machine": {"cpus": 2}, "sessions": sessions,
                                     "workloads": [{"id": wid, "kind": "consume"} for wid in ids]}))
    assert heads["consume MB/s"][0] == pytest.approx((2.0 * 0.8) ** 0.5)
    assert heads["consume MB/s, slowest workload"][0] == pytest.approx(0.8)
    assert heads["consume MB/s, slowest workload"][1].startswith("slowest of 2 workloads (confluent/1024B/16p")


def test_cpu_per_gb_is_read_against_the_kernels_floor_measured_in_the_same_run() -> None:
    data = _data([(10, 20, 0)] * 3)
    for session in data["sessions"]:
        session["results"]["produce/java/100B/1p/acks=1"]["cpu_s_per_gb"] = 2.0 if session["broker"] == "kafka" else 0.5
    name = "produce CPU s/GB at the kernel's floor"
    assert name not in headline_ratios(Results(data))   # results measured before the floor was
    data["machine"].update(produce_floor_cpu_s_per_gb=0.25, consume_floor_cpu_s_per_gb=0.1)
    res = Results(data)
    # a broker spending only the kernel's 0.25 s/GB would stand at 0.25 / 2.0 of Kafka's 2.0 s/GB
    assert headline_ratios(res)[name][0] == pytest.approx(0.125)
    text = "\n".join(limits_analysis(res))
    assert "0.25 s/GB in this run, 'This machine's limits'): klog spent 2× it per workload, Kafka 8×" in text



def test_klogs_system_time_alone_is_read_against_kafkas_whole_cpu_per_gb() -> None:
    data = _data([(10, 20, 0)] * 3)
    for session in data["sessions"]:
        kafka = session["broker"] == "kafka"
        session["results"]["produce/java/100B/1p/acks=1"].update(cpu_s_per_gb=2.0 if kafka else 0.5)
    name = "produce CPU s/GB, klog's system time alone"
    assert name not in headline_ratios(Results(data))   # results measured before the system time was
    for session in data["sessions"]:
        kafka = session["broker"] == "kafka"
        session["results"]["produce/java/100B/1p/acks=1"].update(system_s_per_gb=0.5 if kafka else 0.4)
    res = Results(data)
    # klog's 0.4 s/GB of system time against Kafka's whole 2.0 s/GB
    assert headline_ratios(res)[name][0] == pytest.approx(0.2)
    text = "\n".join(limits_analysis(res))
    assert "(system time over the broker's CPU, per workload, median, min–max): klog 80%, Kafka 25%" in text
    assert "klog's system time alone is 0.20× Kafka's whole CPU per GB" in text


def test_the_analysis_gives_the_load_generators_cpu_and_the_ratio_the_cores_allow() -> None:
    data = _data([(10, 20, 0)] * 3)
    assert "Who used the cores" not in "\n".join(limits_analysis(Results(data)))   # recorded since 2026-12-06
    for session in data["sessions"]:
        kafka = session["broker"] == "kafka"
        session["results"]["produce/java/100B/1p/acks=1"].update(
            payload_gb=1.0, cpu_s=2.0 if kafka else 0.5, loadgen_cpu_s=5.0)
    text = "\n".join(limits_analysis(Results(data)))
    assert "the load generators spent 5 CPU s/GB against klog" in text
    assert "would allow 4.00× Kafka's rate per broker core" in text   # 2 against 0.5 s/GB
    assert "With the 2 cores the limit" not in text   # no CPU over the timed window, no ceiling
    for session in data["sessions"]:
        session["results"]["produce/java/100B/1p/acks=1"]["producer_process_cpu_s"] = 4.0
    text = "\n".join(limits_analysis(Results(data)))
    # (4 + 2) / (4 + 0.5): on shared cores the load generator's 4 s/GB caps klog's lead at 1.33x
    assert "klog could be at most 1.33× Kafka's rate here" in text
    assert "measured 2.00× on them" in text


def test_a_threads_cpu_is_grouped_by_its_name_without_its_number() -> None:
    from sidebyside.procstat import thread_group

    assert thread_group("data-plane-kafka-request-handler-7") == "data-plane-kafka-request-handler"
    assert thread_group("GC Thread#3") == "GC Thread"
    assert thread_group("klog-front") == "klog-front"
    assert thread_group("42") == "42"   # a name that is only a number stays whole


def test_a_running_threads_cpu_is_counted_under_its_group() -> None:
    import ctypes
    import threading
    import time

    from sidebyside.procstat import thread_cpu_delta, thread_cpu_seconds

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_name = 15
    stop = threading.Event()

    def spin(i: int) -> None:
        libc.prctl(pr_set_name, f"hspin-{i}".encode(), 0, 0, 0)   # the OS thread's name, as /proc shows it
        while not stop.is_set():
            pass

    before = thread_cpu_seconds(os.getpid())
    busy = [threading.Thread(target=spin, args=(i,)) for i in range(2)]
    for thread in busy:
        thread.start()
    time.sleep(0.5)
    spent = thread_cpu_delta(before, thread_cpu_seconds(os.getpid()))
    stop.set()
    for thread in busy:
        thread.join(timeout=30)
    user, system = spent["hspin"]
    assert user + system >= 0.1   # two threads spinning for 0.5 s (sharing the GIL): well over a few ticks
    assert user > system


def test_the_many_connections_ceiling_is_the_cores_shared_by_broker_and_load_generator() -> None:
    from bench_request_cost import cores_ceiling, format_many, many_medians

    runs = [{"requests_per_s": 1.0, "p50_ms": 1.0, "p99_ms": 1.0, "p999_ms": 1.0, "broker_cores": 1.0,
             "broker_us": us, "client_us": 10.0, "client_cores": 1.0, "broker_system_us": us - 2.0,
             "client_system_us": 5.0, "threads_us": {"klog-broker": us - 4.0, "klog-front": 4.0}}
            for us in (9.0, 11.0, 10.0)]
    klog = many_medians(runs)
    assert klog["broker_us"] == 10.0 and klog["broker_system_us"] == 8.0
    assert klog["threads_us"] == {"klog-broker": 6.0, "klog-front": 4.0}
    kafka = {**klog, "broker_us": 25.0, "threads_us": {"data-plane-kafka-request-handler": 20.0}}
    many = {"workload": "500c/100B/acks=1", "kafka": kafka, "klog": klog}
    assert cores_ceiling(many) == pytest.approx(35.0 / 20.0)
    assert cores_ceiling(many, "broker_system_us") == pytest.approx(35.0 / 18.0)
    text = format_many(many)
    assert "at most **1.75×**" in text and "at most **1.94×**" in text
    assert "klog's µs CPU per request by thread: klog-broker 6.0, klog-front 4.0." in text


def test_the_transactions_bench_measures_the_clients_and_sizes_it_is_given() -> None:
    import argparse

    import bench_transactions as bt

    parser = argparse.ArgumentParser()
    bt.add_arguments(parser)
    everything = vars(parser.parse_args([]))
    assert everything == {"clients": bt.CLIENTS, "sizes": bt.TXN_SIZES, "consume": True}
    java_at_1000 = vars(parser.parse_args(["--clients", "java", "--sizes", "1000", "--no-consume"]))
    assert java_at_1000 == {"clients": ("java",), "sizes": (1000,), "consume": False}
    assert parser.parse_args(["--sizes", "100,10"]).sizes == (100, 10)
    for wrong in (["--clients", "kafkajs"], ["--sizes", "5"], ["--sizes", ""]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)


def test_a_paired_bench_passes_its_own_options_to_its_run(tmp_path: Path) -> None:
    import bench_transactions as bt
    from sidebyside.paired import paired_main

    seen: list[tuple[int, float, dict[str, object]]] = []

    def run(workdir: Path, rounds: int, scale: float, log: object, **options: object) -> dict[str, object]:
        seen.append((rounds, scale, options))
        return {"rounds": rounds}

    out = tmp_path / "result.json"
    assert paired_main(["--rounds", "2", "--clients", "java", "--sizes", "1000", "--out", str(out)], doc=None,
                       run=run, format_table=lambda result: "", results=out, short_scale=0.2, rounds=5,
                       prefix="paired-test-", add_arguments=bt.add_arguments) == 0
    assert seen == [(2, 1.0, {"clients": ("java",), "sizes": (1000,), "consume": True})]
    assert out.exists()


def test_the_cores_allow_kafkas_client_and_broker_cpu_per_mb_over_klogs() -> None:
    import bench_transactions as bt

    row = {"kafka": {"client_cpu_ms_per_mb": 5.0, "broker_cpu_ms_per_mb": 7.0},
           "klog": {"client_cpu_ms_per_mb": 4.0, "broker_cpu_ms_per_mb": 2.0}}
    # (5 + 7) / (4 + 2): on shared cores the client's own 4-5 ms/MB caps klog's lead at 2x, whatever its broker
    assert bt.cores_allow(row) == pytest.approx(2.0)
    assert bt.cores_allow({"kafka": {"mb_per_s": 1.0}, "klog": {"mb_per_s": 2.0}}) is None
