"""The fault checker on hand-written histories: each anomaly is found, a clean history passes, indeterminate
writes are never counted lost; the history file round-trips; fault schedules are reproducible from a seed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from klog.testing.faults.checker import ANOMALIES, check
from klog.testing.faults.history import HistoryWriter, merge, read_history
from klog.testing.faults.schedule import FAULT_KINDS, FaultStep, each_once, end_s, random_schedule, timeline


class H:
    """A tiny history builder: each call is one event, times 1, 2, 3, ..."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def _add(self, **e: Any) -> None:
        self.events.append({"time": len(self.events) + 1, **e})

    def send(self, process: str, partition: int, value: str, offset: int | None, outcome: str = "ok") -> None:
        self._add(process=process, type="invoke", f="send", partition=partition, value=value)
        done: dict[str, Any] = {"process": process, "type": outcome, "f": "send", "partition": partition, "value": value}
        if offset is not None:
            done["offset"] = offset
        self._add(**done)

    def poll(self, process: str, records: list[tuple[int, int, str]], generation: int = 1) -> None:
        self._add(process=process, type="invoke", f="poll")
        self._add(process=process, type="ok", f="poll", records=[list(r) for r in records], generation=generation)

    def fault(self, fault: str, phase: str = "start", nodes: list[int] | None = None) -> None:
        self._add(process="nemesis", type="info", f="fault", fault=fault, phase=phase, nodes=nodes or [1])


def clean() -> tuple[H, dict[int, list[tuple[int, str]]]]:
    h = H()
    h.send("p0", 0, "a", 0)
    h.send("p0", 0, "b", 1)
    h.send("p1", 1, "x", 0)
    h.fault("kill")
    h.send("p1", 1, "y", 1)
    h.fault("kill", "end")
    h.poll("c0", [(0, 0, "a"), (0, 1, "b"), (1, 0, "x")])
    h.poll("c0", [(1, 1, "y")])
    return h, {0: [(0, "a"), (1, "b")], 1: [(0, "x"), (1, "y")]}


def only(result: Any, anomaly: str) -> list[dict[str, Any]]:
    assert result.counts[anomaly] >= 1, result.summary()
    others = {a: n for a, n in result.counts.items() if a != anomaly and n}
    assert not others, result.summary()
    return list(result.details[anomaly])


def test_clean_history_is_valid() -> None:
    h, final = clean()
    result = check(h.events, final)
    assert result.valid, result.summary()
    assert result.counts == {a: 0 for a in ANOMALIES}
    assert result.stats["acknowledged"] == 4 and result.stats["polled"] == 4 and result.stats["faults"] == 1


def test_lost_acknowledged_write_names_the_faults_around_it() -> None:
    h, final = clean()
    h.send("p0", 0, "c", 2)
    h.fault("isolate-leader", nodes=[2])
    lost = only(check(h.events, final), "lost")
    assert lost == [{"partition": 0, "value": "c", "offset": 2, "process": "p0", "acked_at": 16,
                     "fault_before": {"time": 7, "fault": "kill", "nodes": [1]},
                     "fault_after": {"time": 17, "fault": "isolate-leader", "nodes": [2]}}]


def test_indeterminate_and_failed_writes_are_never_lost() -> None:
    h, final = clean()
    h.send("p0", 0, "maybe", None, outcome="info")
    h.send("p0", 0, "no", None, outcome="fail")
    result = check(h.events, final)
    assert result.valid, result.summary()
    assert result.stats["indeterminate"] == 1 and result.stats["failed"] == 1


def test_indeterminate_write_found_in_the_log_is_fine() -> None:
    h, final = clean()
    h.send("p0", 0, "maybe", None, outcome="info")
    final[0].append((2, "maybe"))
    assert check(h.events, final).valid


def test_duplicate_in_the_final_read() -> None:
    h, final = clean()
    final[0].append((2, "b"))
    dup = only_two(check(h.events, final), "duplicate", "value_two_offsets")
    assert dup == [{"partition": 0, "value": "b", "offsets": [1, 2]}]


def only_two(result: Any, anomaly: str, also: str) -> list[dict[str, Any]]:
    assert result.counts[anomaly] == 1 and result.counts[also] == 1, result.summary()
    assert sum(result.counts.values()) == 2, result.summary()
    return list(result.details[anomaly])


def test_offset_holding_two_values() -> None:
    h, final = clean()
    h.poll("c1", [(1, 1, "z")])  # a consumer read another value at 1:1 than the log holds
    bad = only(check(h.events, final), "offset_two_values")
    assert bad[0]["partition"] == 1 and bad[0]["offset"] == 1 and set(bad[0]["values"]) == {"y", "z"}
    assert bad[0]["fault_before"]["fault"] == "kill"


def test_value_at_two_offsets() -> None:
    h, final = clean()
    h.send("p0", 0, "c", 5)  # acknowledged at offset 5, stored at offset 2
    final[0].append((2, "c"))
    bad = only(check(h.events, final), "value_two_offsets")
    assert bad[0]["value"] == "c" and set(bad[0]["positions"]) == {"0:2", "0:5"}


def test_reordered_writes_of_one_producer() -> None:
    h = H()
    h.send("p0", 0, "first", 1)
    h.send("p0", 0, "second", 0)
    final = {0: [(0, "second"), (1, "first")]}
    bad = only(check(h.events, final), "reorder")
    assert bad[0]["value"] == "second" and bad[0]["after_value"] == "first"


def test_interleaved_producers_are_not_reordering() -> None:
    h = H()
    h.send("p0", 0, "a", 0)
    h.send("p1", 0, "x", 1)
    h.send("p0", 0, "b", 2)
    assert check(h.events, {0: [(0, "a"), (1, "x"), (2, "b")]}).valid


def test_consumer_going_backwards_within_a_generation() -> None:
    h, final = clean()
    h.poll("c0", [(0, 0, "a")])
    bad = only(check(h.events, final), "poll_backwards")
    assert bad[0]["from_offset"] == 1 and bad[0]["to_offset"] == 0 and bad[0]["partition"] == 0


def test_rereading_in_a_new_generation_is_fine() -> None:
    h, final = clean()
    h.poll("c0", [(0, 0, "a")], generation=2)
    assert check(h.events, final).valid


def test_consumer_skipping_records_the_log_holds() -> None:
    h = H()
    for i, v in enumerate("abc"):
        h.send("p0", 0, v, i)
    h.poll("c0", [(0, 0, "a"), (0, 2, "c")])
    bad = only(check(h.events, {0: [(0, "a"), (1, "b"), (2, "c")]}), "poll_skip")
    assert bad[0]["skipped"] == [1]


def test_gap_without_records_is_not_a_skip() -> None:
    h = H()
    h.send("p0", 0, "a", 0)
    h.send("p0", 0, "c", 2)
    h.poll("c0", [(0, 0, "a"), (0, 2, "c")])
    assert check(h.events, {0: [(0, "a"), (2, "c")]}).valid


def test_replicas_differing_below_the_high_watermark() -> None:
    h, final = clean()
    replicas = {0: {1: [(0, "a"), (1, "b")], 2: [(0, "a"), (1, "q")], 3: [(0, "a")]}}
    bad = only(check(h.events, final, replicas, {0: 2}), "replica_divergence")
    assert bad == [{"partition": 0, "offset": 1, "high_watermark": 2, "replicas": {"1": "b", "2": "q", "3": None}}]


def test_replicas_may_differ_above_the_high_watermark() -> None:
    h, final = clean()
    replicas = {0: {1: [(0, "a"), (1, "b"), (2, "tail")], 2: [(0, "a"), (1, "b")]}}
    assert check(h.events, final, replicas, {0: 2}).valid
    with pytest.raises(ValueError, match="high watermark"):
        check(h.events, final, replicas, {})


def test_history_round_trip_and_merge_by_time(tmp_path: Any) -> None:
    with HistoryWriter(tmp_path / "p0.jsonl", "p0") as p0, HistoryWriter(tmp_path / "c0.jsonl", "c0") as c0:
        p0.log("invoke", "send", partition=0, value="a")
        c0.log("invoke", "poll")
        p0.log("ok", "send", partition=0, value="a", offset=0)
        c0.log("ok", "poll", records=[[0, 0, "a"]], generation=1)
    with open(tmp_path / "c0.jsonl", "a") as torn:  # a writer killed mid-line
        torn.write('{"time": 1')
    events = merge([tmp_path / "p0.jsonl", tmp_path / "c0.jsonl"], tmp_path / "history.jsonl")
    assert [(e["process"], e["type"]) for e in events] == [("p0", "invoke"), ("c0", "invoke"), ("p0", "ok"),
                                                           ("c0", "ok")]
    assert read_history(tmp_path / "history.jsonl") == events
    assert all(isinstance(e["time"], int) for e in events)
    assert check(events, {0: [(0, "a")]}).valid
    (tmp_path / "bad.jsonl").write_text('{"time": 1\n{"time": 2}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_history(tmp_path / "bad.jsonl")


def test_schedule_is_a_function_of_its_seed() -> None:
    a = random_schedule(7, [1, 2, 3], 50)
    assert a == random_schedule(7, [1, 2, 3], 50)
    assert a != random_schedule(8, [1, 2, 3], 50)
    assert {s.kind for s in a} == set(FAULT_KINDS)
    json.dumps([s.to_json() for s in a])
    for prev, step in zip(a, a[1:]):  # steps never overlap
        assert step.at_s >= prev.at_s + prev.duration_s
    for s in a:
        if s.kind == "pause":
            assert s.duration_s > 6.0  # longer than the session timeout
        if s.kind == "split":
            major, minor = s.groups
            assert len(major) > len(minor) and sorted(major + minor) == [1, 2, 3]


def test_each_once_keeps_the_order_of_kinds() -> None:
    steps = each_once(3, [1, 2, 3], ["kill", "pause", "isolate-leader"], session_timeout_s=3.0)
    assert [s.kind for s in steps] == ["kill", "pause", "isolate-leader"]
    assert steps == each_once(3, [1, 2, 3], ["kill", "pause", "isolate-leader"], session_timeout_s=3.0)
    assert steps[2].target == "leader" and end_s(steps) == steps[2].at_s + steps[2].duration_s


def test_timeline_heals_before_the_next_start_and_interleaves_overlaps() -> None:
    back_to_back = [FaultStep(1.0, "kill", 2.0, target=1), FaultStep(3.0, "pause", 4.0, target=2)]
    assert timeline(back_to_back) == [(1.0, "start", 0), (3.0, "heal", 0), (3.0, "start", 1), (7.0, "heal", 1)]
    overlapping = [FaultStep(3.0, "pause", 14.0, target=2), FaultStep(3.0, "pause", 14.0, target=3),
                   FaultStep(12.0, "kill", 16.0, target=1)]
    assert timeline(overlapping) == [(3.0, "start", 0), (3.0, "start", 1), (12.0, "start", 2), (17.0, "heal", 0),
                                     (17.0, "heal", 1), (28.0, "heal", 2)]


def test_ring_cuts_leave_every_node_a_different_majority() -> None:
    for nodes in ([1, 2, 3], [1, 2, 3, 4, 5]):
        for seed in range(20):
            (step,) = each_once(seed, nodes, ["ring"])
            cut = {frozenset(pair) for pair in step.groups}
            assert cut, step
            sees = {n: {n} | {m for m in nodes if m != n and frozenset((n, m)) not in cut} for n in nodes}
            assert all(len(v) > len(nodes) // 2 for v in sees.values()), sees  # a majority each
            assert len({frozenset(v) for v in sees.values()}) > 1, sees  # but not the same one


def test_corrupt_steps_name_a_mode_and_a_size() -> None:
    steps = random_schedule(11, [1, 2, 3], 200, kinds=["corrupt"])
    assert {s.params["mode"] for s in steps} == {"truncate", "bitflip"}
    assert all(1 <= s.params["bytes"] <= 300 and s.target in (1, 2, 3) for s in steps)
