"""Log compaction and retention configs as a user sees them, on klog and on Apache Kafka 4.3.1 from the same
requests (one broker of each kind for the module, started from the same properties, the cleaner and the retention
check running every few hundred milliseconds). Records are produced with explicit timestamps a second apart, so that
``segment.ms`` rolls a segment per batch without waiting (a roll follows the records' timestamps); cleaning is
awaited as a condition a consumer observes, bounded. Found by a differential probe on 2026-12-07: the keyless-record
error's message, ``retention.bytes`` below -1 and ``segment.index.bytes`` below 12 (klog's broker failed to apply
them), and ListOffsets MAX_TIMESTAMP once the cleaner removed the record holding it differed; switching a topic to
``compact`` and back, what cleaning leaves and ListOffsets then, a tombstone's life, the compaction lags and an empty
``cleanup.policy`` were alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from test_log_configs_data_vs_kafka import Wire
from test_transactions_compaction import Record, read_records

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

#: the module's brokers' properties beside the defaults (conftest's klog_and_kafka_bootstrap)
BROKER_PROPERTIES = {"auto.create.topics.enable": "false", "log.cleaner.backoff.ms": 200,
                     "log.retention.check.interval.ms": 300, "log.initial.task.delay.ms": 0}
#: a compacted topic whose every batch a second later than the last is a segment of its own, cleaned as soon as
#: the cleaner sees it
QUICK_COMPACTION = {"segment_ms": "100", "min_cleanable_dirty_ratio": "0.01"}
#: how long a test waits for the cleaner (Kafka's and klog's act within a few seconds here)
CLEANER_WAIT_S = 60.0


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    return klog_and_kafka_bootstrap


class Clock:
    """Record timestamps a second apart, starting a minute ago: each batch produced with the next one rolls the
    segment (``segment.ms`` 100) without the test waiting."""

    def __init__(self) -> None:
        self.next_ms = int(time.time() * 1000) - 60_000

    def tick(self) -> int:
        self.next_ms += 1000
        return self.next_ms


def produce(wire: Wire, topic: str, records: list[tuple[bytes | None, bytes | None]], clock: Clock) -> Any:
    """One batch of (key, value) records stamped with the clock's next second: the partition's answer."""
    ts = clock.tick()
    return wire.produce_answer(topic, encode_batch([{"key": k, "value": v, "timestamp": ts} for k, v in records]))


def alter(wire: Wire, topic: str, **configs: str) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET of ``configs`` (``_`` for ``.``) on ``topic``: (error code, message)."""
    answer = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": k.replace("_", "."), "config_operation": 0, "value": v} for k, v in configs.items()]}]})
    return answer.responses[0].error_code, answer.responses[0].error_message


def described(wire: Wire, topic: str, name: str) -> str | None:
    answer = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": [name]}],
        "include_synonyms": False, "include_documentation": False})
    return next(c.value for c in answer.results[0].configs if c.name == name)


def until_read(bootstrap: str, topic: str, done: Callable[[list[Record]], bool], *,
               between: Callable[[], None] | None = None) -> list[Record]:
    """The records a consumer reads once ``done(records)`` holds (``between()`` runs after each read that did
    not satisfy it), within CLEANER_WAIT_S."""
    deadline = time.monotonic() + CLEANER_WAIT_S
    while True:
        records = read_records(bootstrap, topic)
        if done(records):
            return records
        assert time.monotonic() < deadline, f"{topic}: the cleaner did not act; the log reads {records}"
        if between is not None:
            between()
        time.sleep(0.3)


@pytest.mark.parametrize("policy,codec", [("compact", "none"), ("compact,delete", "gzip")])
def test_a_keyless_record_on_a_compacted_topic_is_refused_naming_its_partition(bootstrap: str, policy: str,
                                                                               codec: str) -> None:
    """The whole batch is INVALID_RECORD with a record error per keyless record, each naming the topic partition
    as Kafka's LogValidator does (klog's said only "Compacted topic cannot accept message without key")."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(cleanup_policy=policy)
        answer = wire.produce_answer(topic, encode_batch(
            [{"key": b"k", "value": b"v"}, {"key": None, "value": b"x"}, {"key": None, "value": None}],
            compression=codec))
        error = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
        assert (answer.error_code, answer.base_offset) == (ErrorCode.INVALID_RECORD, -1)
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [(1, error),
                                                                                                (2, error)]
        assert answer.error_message == (
            "One or more records have been rejected due to 2 record errors in total, and only showing the first "
            f"three errors at most: [RecordError(batchIndex=1, message='{error}'), "
            f"RecordError(batchIndex=2, message='{error}')]")
        assert wire.list_offset(topic, -1)[:2] == (ErrorCode.NONE, 0)


def test_a_negative_retention_bytes_is_taken_as_no_size_bound(bootstrap: str) -> None:
    """Kafka's LogConfig puts no lower bound on ``retention.bytes``: -2 is taken at creation and by
    IncrementalAlterConfigs, and any negative value is no size bound (klog refused it where the broker applies
    the topic's configs, after the controller had committed them: the alter's connection closed and every later
    metadata change failed the same way)."""
    with Wire(bootstrap) as wire:
        created = wire.create_topic(retention_bytes="-2", segment_ms="100")
        assert described(wire, created, "retention.bytes") == "-2"
        topic = wire.create_topic(segment_ms="100")
        clock = Clock()
        for i in range(3):
            assert produce(wire, topic, [(None, b"v%d" % i)], clock).error_code == ErrorCode.NONE
        assert alter(wire, topic, retention_bytes="-5") == (ErrorCode.NONE, None)
        assert described(wire, topic, "retention.bytes") == "-5"
        # the broker applied it and takes further changes: a config and a new topic
        assert alter(wire, topic, retention_ms="-1") == (ErrorCode.NONE, None)
        wire.create_topic()
        assert produce(wire, topic, [(None, b"v3")], clock).error_code == ErrorCode.NONE
        assert [value for _, _, value in read_records(bootstrap, topic)] == [b"v0", b"v1", b"v2", b"v3"]


def until_keyless_answered(wire: Wire, topic: str, clock: Clock, code: int) -> None:
    """Produce a keyless record until it is answered ``code`` (within 10 s): the broker applied an altered
    ``cleanup.policy`` (INVALID_RECORD once compacted, NONE once not)."""
    for _ in range(100):
        if produce(wire, topic, [(None, b"keyless")], clock).error_code == code:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}: a keyless record was never answered {code}")


def test_a_topic_switched_to_compact_loses_its_keyless_records_and_keeps_each_keys_latest(bootstrap: str) -> None:
    """delete -> compact at run time: the cleaner drops the keyless records written before (Kafka's cleaner
    counts them invalid and keeps none) and all but each key's latest value, offsets kept; the active segment
    stays; ListOffsets then answers the same earliest (the log start offset, 0), latest and max timestamp;
    back to delete, keyless records are taken again."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(**QUICK_COMPACTION)
        clock = Clock()
        for i in range(3):
            answer = produce(wire, topic, [(None, b"nokey%d" % i), (b"a", b"a%d" % i)], clock)
            assert answer.error_code == ErrorCode.NONE
        assert alter(wire, topic, cleanup_policy="compact") == (ErrorCode.NONE, None)
        # then the next batches roll segments of a compacted log
        until_keyless_answered(wire, topic, clock, ErrorCode.INVALID_RECORD)
        end = wire.list_offset(topic, -1)[1]
        assert produce(wire, topic, [(b"b", b"b")], clock).error_code == ErrorCode.NONE
        last_ts = clock.next_ms + 1000
        assert produce(wire, topic, [(b"c", b"c")], clock).error_code == ErrorCode.NONE
        records = until_read(bootstrap, topic, lambda rs: all(k is not None for _, k, _ in rs))
        # each key's latest (a's at the offset the third batch gave it) and c, in the active segment
        assert records == [(end - 1, b"a", b"a2"), (end, b"b", b"b"), (end + 1, b"c", b"c")]
        assert wire.list_offset(topic, -2) == (ErrorCode.NONE, 0, -1)
        assert wire.list_offset(topic, -1) == (ErrorCode.NONE, end + 2, -1)
        assert wire.list_offset(topic, -3) == (ErrorCode.NONE, end + 1, last_ts)
        assert alter(wire, topic, cleanup_policy="delete") == (ErrorCode.NONE, None)
        until_keyless_answered(wire, topic, clock, ErrorCode.NONE)


def test_a_tombstone_replaces_its_keys_values_and_goes_after_delete_retention_ms(bootstrap: str) -> None:
    """A key's tombstone replaces its values at a cleaning and is itself removed by a cleaning after
    ``delete.retention.ms`` (later records make the log dirty again); the records kept keep their offsets.
    Whether a consumer sees the tombstone between the two depends on when each broker's cleaner runs: not
    asserted."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(**QUICK_COMPACTION, cleanup_policy="compact", delete_retention_ms="2000")
        clock = Clock()
        assert produce(wire, topic, [(b"k", b"k0"), (b"j", b"j0")], clock).error_code == ErrorCode.NONE
        assert produce(wire, topic, [(b"k", b"k1")], clock).error_code == ErrorCode.NONE
        assert produce(wire, topic, [(b"k", None)], clock).error_code == ErrorCode.NONE
        fillers = iter(range(1000))

        def more() -> None:   # another segment: the log is dirty again and the last one rolled
            assert produce(wire, topic, [(b"f", b"%d" % next(fillers))], clock).error_code == ErrorCode.NONE

        more()
        records = until_read(bootstrap, topic, lambda rs: not any(k == b"k" for _, k, _ in rs), between=more)
        assert records[0] == (1, b"j", b"j0")
        # each filler's value is its own: only the latest stays (and the active segment's)
        assert {k for _, k, _ in records} == {b"j", b"f"}


def test_max_compaction_lag_ms_cleans_a_log_its_dirty_ratio_never_would(bootstrap: str) -> None:
    """With ``min.cleanable.dirty.ratio=1`` no ratio passes it; records older than ``max.compaction.lag.ms`` make
    the log cleanable anyway."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(cleanup_policy="compact", segment_ms="100", min_cleanable_dirty_ratio="1",
                                  max_compaction_lag_ms="100")
        clock = Clock()
        for i in range(3):
            assert produce(wire, topic, [(b"k", b"k%d" % i)], clock).error_code == ErrorCode.NONE
        assert produce(wire, topic, [(b"last", b"")], clock).error_code == ErrorCode.NONE
        assert until_read(bootstrap, topic, lambda rs: len(rs) == 2) == [(2, b"k", b"k2"), (3, b"last", b"")]


def test_min_compaction_lag_ms_keeps_newer_records_out_of_cleaning(bootstrap: str) -> None:
    """Two topics written alike, one with ``min.compaction.lag.ms`` an hour (its records are a minute old): once
    the other is cleaned, the lagging one still reads every record."""
    with Wire(bootstrap) as wire:
        lagging = wire.create_topic(**QUICK_COMPACTION, cleanup_policy="compact", min_compaction_lag_ms="3600000")
        cleaned = wire.create_topic(**QUICK_COMPACTION, cleanup_policy="compact")
        for topic in (lagging, cleaned):
            clock = Clock()
            for i in range(3):
                assert produce(wire, topic, [(b"k", b"k%d" % i)], clock).error_code == ErrorCode.NONE
            assert produce(wire, topic, [(b"last", b"")], clock).error_code == ErrorCode.NONE
        assert until_read(bootstrap, cleaned, lambda rs: len(rs) == 2) == [(2, b"k", b"k2"), (3, b"last", b"")]
        assert [offset for offset, _, _ in read_records(bootstrap, lagging)] == [0, 1, 2, 3]


def test_a_segment_index_bytes_below_one_entry_is_taken_and_the_broker_keeps_working(bootstrap: str) -> None:
    """Kafka takes ``segment.index.bytes`` from 4 (an index that holds no entry; klog's indexes hold one at least
    and use 12 bytes then): the alter is answered NONE and the broker applies it and takes further changes (klog's
    failed to apply 4-11 as it failed on ``retention.bytes=-2``, every later metadata change with it). Creating a
    topic with such a value leaves it without a leader on Kafka 4.3.1: not done here."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        assert alter(wire, topic, segment_index_bytes="4") == (ErrorCode.NONE, None)
        assert described(wire, topic, "segment.index.bytes") == "4"
        other = wire.create_topic()
        clock = Clock()
        for target in (topic, other):
            assert produce(wire, target, [(None, b"v")], clock).error_code == ErrorCode.NONE
            assert read_records(bootstrap, target) == [(0, None, b"v")]


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts(bootstrap: str) -> None:
    """``cleanup.policy=`` (no policy, taken by Kafka 4.3.1): once a ``delete`` topic written alike lost its expired
    segments to ``retention.ms``, the policy-less one still reads every record, duplicate keys too."""
    with Wire(bootstrap) as wire:
        kept = wire.create_topic(**QUICK_COMPACTION, cleanup_policy="", retention_ms="1000")
        expired = wire.create_topic(**QUICK_COMPACTION, cleanup_policy="delete", retention_ms="1000")
        for topic in (kept, expired):
            clock = Clock()
            for i in range(3):
                assert produce(wire, topic, [(b"k", b"k%d" % i)], clock).error_code == ErrorCode.NONE
        deadline = time.monotonic() + CLEANER_WAIT_S
        while wire.list_offset(expired, -2)[1] == 0:
            assert time.monotonic() < deadline, "retention never deleted a segment"
            time.sleep(0.3)
        assert wire.list_offset(kept, -2)[:2] == (ErrorCode.NONE, 0)
        assert [offset for offset, _, _ in read_records(bootstrap, kept)] == [0, 1, 2]


def test_list_offsets_max_timestamp_forgets_a_record_the_cleaner_removed(bootstrap: str) -> None:
    """The record with the largest timestamp is replaced by a later value of its key with an earlier timestamp
    (each batch fills a 1 MiB segment of its own); once it is cleaned away, MAX_TIMESTAMP answers the largest
    timestamp left, and no record is found at or after the removed one's time (klog kept an emptied batch at the
    end of each cleaned segment and answered the removed record's offset and timestamp for both)."""
    with Wire(bootstrap) as wire:
        topic = wire.create_topic(cleanup_policy="compact", segment_bytes=str(1 << 20),
                                  min_cleanable_dirty_ratio="0.01")
        start = int(time.time() * 1000) - 60_000
        value = b"v" * 600_000
        for offset, (key, ts) in enumerate([(b"x", start + 10_000), (b"x", start), (b"y", start - 1000),
                                            (b"z", start - 2000)]):
            answer = wire.produce_answer(topic, encode_batch([{"key": key, "value": value, "timestamp": ts}]))
            assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, offset)
        assert wire.list_offset(topic, -3) == (ErrorCode.NONE, 0, start + 10_000)
        records = until_read(bootstrap, topic, lambda rs: len(rs) == 3)
        assert [(offset, key) for offset, key, _ in records] == [(1, b"x"), (2, b"y"), (3, b"z")]
        assert wire.list_offset(topic, -3) == (ErrorCode.NONE, 1, start)
        assert wire.list_offset(topic, start + 5000) == (ErrorCode.NONE, -1, -1)
