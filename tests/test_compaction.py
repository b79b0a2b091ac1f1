"""Log compaction end to end: a real klog-broker process cleans compacted topics with its native cleaner.

The same produce scenario (updates, tombstones, an idempotent producer) runs against klog and, where Java is
available, Apache Kafka 4.x; after cleaning, a full read sees exactly the latest value of each key (tombstones
kept while delete.retention.ms has not passed), at its original offset, offsets increasing with gaps; a group
resumes from a committed offset inside a cleaned range; Kafka's DumpLogSegments --deep-iteration reads the cleaned
segments; and Kafka ends with the same (key, latest value) pairs.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from klog.testing.process import BrokerProcess, data_dir_for  # noqa: E402

#: records are keyed "key-<n>"; filler records ("filler-<n>", unique keys) push the scenario's records out of the
#: active segment, which is never cleaned
FILLER = b"filler-"
#: a throttle far above these tests' volumes: its path runs in every pass without slowing them
CLEANER_CONFIG = {"log.cleaner.backoff.ms": 100, "log.cleaner.io.max.bytes.per.second": 50_000_000}


def compacted_configs(segment_bytes: int, **extra: str) -> dict[str, str]:
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "3600000", **extra}


def create_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def produce_scenario(bootstrap: str, topic: str, *, keys: int, rounds: int, value_bytes: int,
                     seed: int = 7) -> tuple[dict[bytes, bytes | None], int]:
    """Rounds of updates in a seeded order, every 7th key deleted in the middle round and every 11th key deleted at
    the end, through an idempotent producer. Returns (key -> latest value or None, offset after the last record)."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "compression.type": "lz4"})
    latest: dict[bytes, bytes | None] = {}
    pad = b"x" * max(0, value_bytes - 24)
    last_offset = [-1]

    def sent(err, msg):  # noqa: ANN001 - confluent callback
        assert err is None, err
        last_offset[0] = max(last_offset[0], msg.offset())

    for r in range(rounds):
        order = list(range(keys))
        rng.shuffle(order)
        for k in order:
            key = b"key-%d" % k
            value: bytes | None = b"v-%d-%d-" % (k, r) + pad
            if (r == rounds // 2 and k % 7 == 0) or (r == rounds - 1 and k % 11 == 0):
                value = None
            producer.produce(topic, key=key, value=value, partition=0, on_delivery=sent)
            latest[key] = value
        producer.poll(0)
    assert producer.flush(60) == 0
    return latest, last_offset[0] + 1


def produce_fillers(bootstrap: str, topic: str, total_bytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    body = b"f" * 1000
    for i in range(total_bytes // 1000 + 1):
        producer.produce(topic, key=FILLER + b"%d" % i, value=body, partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, topic: str, start: int | None = None,
             group: str | None = None) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 from `start` (or a group's committed offset) to the high watermark."""
    conf = {"bootstrap.servers": bootstrap, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "group.id": group or f"reader-{time.monotonic_ns()}", "enable.partition.eof": True}
    consumer = Consumer(conf)
    try:
        if group is not None:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, 0, start if start is not None else -2)])
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        return out
                    continue
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() + 1 >= high:
                return out
        raise AssertionError(f"read of {topic} did not reach {high}: {len(out)} records")
    finally:
        consumer.close()


def read_all_klog_client(bootstrap: str, topic: str, start: int) -> list[tuple[int, bytes, bytes | None]]:
    """The same read through klog's own client (it must skip the gaps and empty batches cleaning leaves)."""
    from klog.client import Consumer as KlogConsumer
    from klog.client import TopicPartition as KlogTopicPartition

    tp = KlogTopicPartition(topic, 0)
    with KlogConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, start)
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end and time.monotonic() < deadline:
            out += [(r.offset, r.key, r.value) for r in consumer.poll(1.0)]
        assert consumer.position(tp) == end
        return out


def read_group_kafka_python(bootstrap: str, topic: str, group: str) -> list[tuple[int, bytes, bytes | None]]:
    """A group's read from its committed offset to the high watermark through kafka-python."""
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                   auto_offset_reset="earliest", consumer_timeout_ms=60_000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        high = consumer.end_offsets([tp])[tp]
        out: list[tuple[int, bytes, bytes | None]] = []
        for msg in consumer:
            out.append((msg.offset, msg.key, msg.value))
            if msg.offset + 1 >= high:
                break
        return out
    finally:
        consumer.close()


def alter_topic(bootstrap: str, topic: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET of topic configs (names with '_' for '.')."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([change])[change].result(15)


def cleaner_checkpoint(data_dir: str, topic: str) -> int:
    try:
        with open(os.path.join(data_dir, "cleaner-offset-checkpoint"), encoding="ascii") as handle:
            for line in handle.read().splitlines()[2:]:
                t, p, o = line.split()
                if t == topic and p == "0":
                    return int(o)
    except FileNotFoundError:
        pass
    return -1


def wait_cleaned(data_dir: str, topic: str, upto: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while cleaner_checkpoint(data_dir, topic) < upto:
        assert time.monotonic() < deadline, f"{topic} not cleaned up to {upto}: {cleaner_checkpoint(data_dir, topic)}"
        time.sleep(0.1)


def scenario_records(records: list[tuple[int, bytes, bytes | None]]) -> list[tuple[int, bytes, bytes | None]]:
    return [r for r in records if not r[1].startswith(FILLER)]


def check_compacted(records: list[tuple[int, bytes, bytes | None]], latest: dict[bytes, bytes | None],
                    produced_until: int) -> None:
    """Exactly one record per key, the latest value (tombstones included), offsets increasing with gaps."""
    ours = scenario_records(records)
    keys = [k for _, k, _ in ours]
    assert len(keys) == len(set(keys)), "a key appears twice after cleaning"
    assert {k: v for _, k, v in ours} == latest
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets increase"
    assert len(ours) < produced_until, "cleaning removed records (offsets have gaps)"


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    with BrokerProcess(data_dir_for(tmp_path), CLEANER_CONFIG) as b:
        yield b


def test_a_compacted_topic_is_cleaned_to_the_latest_value_of_each_key(broker):
    topic = "compacted"
    create_topic(broker.bootstrap_servers, topic, compacted_configs(16_384))
    latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=300, rounds=8, value_bytes=100)
    # A group committed an offset in the middle of what is about to be cleaned.
    committed = end // 2
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "resumer"})
    c.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
    c.close()
    produce_fillers(broker.bootstrap_servers, topic, 40_000)
    wait_cleaned(broker.data_dir, topic, end)
    records = read_all(broker.bootstrap_servers, topic)
    check_compacted(records, latest, end)
    # The group resumes at the first record at or after its offset and sees every key written from there on.
    resumed = read_all(broker.bootstrap_servers, topic, group="resumer")
    assert resumed and resumed[0][0] >= committed
    assert [r for r in records if r[0] >= committed] == resumed
    # A consumer seeking into the middle of a cleaned range starts at the next record kept.
    kept = [o for o, _, _ in records]
    missing = next(o for o in range(1, end) if o not in set(kept))
    assert read_all(broker.bootstrap_servers, topic, start=missing)[0][0] == min(o for o in kept if o > missing)
    # klog's client reads the cleaned log the same way, from the start and from inside a cleaned range.
    assert read_all_klog_client(broker.bootstrap_servers, topic, 0) == records
    assert read_all_klog_client(broker.bootstrap_servers, topic, missing) == [r for r in records if r[0] > missing]
    # kafka-python resumes the same group from the same committed offset inside the cleaned range.
    assert read_group_kafka_python(broker.bootstrap_servers, topic, "resumer") == resumed


def test_several_cleaner_threads_clean_many_compacted_topics_while_they_are_written(tmp_path):
    """log.cleaner.threads=4 over 6 compacted topics, cleaned pass after pass while they are written: every topic
    ends with exactly the latest value of each key, and no pass fails. (Two threads once took one log at the same
    moment; one pass's abandon then deleted the other's cleaned segment before its swap, whose old segments went
    with nothing in their place: rust/klog-core/src/storage/cleaner/tests.rs has the deterministic tests.)"""
    topics = [f"busy-{i}" for i in range(6)]
    config = {**CLEANER_CONFIG, "log.cleaner.threads": 4, "log.cleaner.backoff.ms": 5,
              "log.segment.delete.delay.ms": 0}
    with BrokerProcess(data_dir_for(tmp_path), config) as broker:
        bootstrap = broker.bootstrap_servers
        for topic in topics:
            create_topic(bootstrap, topic, compacted_configs(4096))
        latest: dict[str, dict[bytes, bytes | None]] = {}
        end: dict[str, int] = {}
        for round_ in range(4):   # every key written in every round: the last round's values are the latest
            for i, topic in enumerate(topics):
                latest[topic], end[topic] = produce_scenario(bootstrap, topic, keys=60, rounds=2, value_bytes=100,
                                                             seed=round_ * 100 + i)
        for topic in topics:
            produce_fillers(bootstrap, topic, 12_000)
            wait_cleaned(broker.data_dir, topic, end[topic])
        for topic in topics:
            check_compacted(read_all(bootstrap, topic), latest[topic], end[topic])
        failures = [line for line in broker.log_text().splitlines() if "log cleaner" in line and "fail" in line]
        assert not failures, failures


def test_cleaned_segments_survive_a_restart_and_dump_log_segments_reads_them(tmp_path):
    data = data_dir_for(tmp_path)
    topic = "dumped"
    with BrokerProcess(data, CLEANER_CONFIG) as broker:
        create_topic(broker.bootstrap_servers, topic, compacted_configs(8_192))
        latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=100, rounds=6, value_bytes=60)
        produce_fillers(broker.bootstrap_servers, topic, 20_000)
        wait_cleaned(broker.data_dir, topic, end)
        before = read_all(broker.bootstrap_servers, topic)
    with BrokerProcess(data, CLEANER_CONFIG) as broker:
        assert read_all(broker.bootstrap_servers, topic) == before
    check_compacted(before, latest, end)
    import re

    from test_storage_oracle import ERROR_MARKERS, run_dump, segment_files

    part = os.path.join(data, f"{topic}-0")
    files = segment_files(part)
    out = run_dump([f for f in files if f.endswith(".log")], "--deep-iteration", "--print-data-log")
    bad = [line for line in out.splitlines() if any(m in line for m in ERROR_MARKERS)]
    assert not bad, "\n".join(bad[:20])
    dumped = re.findall(r"^\| offset: (\d+) CreateTime: -?\d+ .*? key: (\S+)", out, re.M)
    assert [(int(o), k.encode()) for o, k in dumped] == [(o, k) for o, k, _ in before]
    # Kafka's reader sees the cleaner's delete horizon on the batches holding tombstones.
    assert "deleteHorizonMs: OptionalLong[" in out
    sanity = run_dump(files, "--index-sanity-check")
    n_indexes = sum(f.endswith((".index", ".timeindex")) for f in files)
    assert sanity.count("passed sanity check") + sanity.count(".index is empty.") == n_indexes, sanity[-2000:]


def _swap_failure_takes_the_log_dir_offline(tmp_path, topic: str, obstacle_suffix: str, reason: str) -> None:
    """The first sealed segment of a compacted topic is cleaned with a non-empty directory at its ``.log`` name plus
    ``obstacle_suffix`` (a rename of the swap fails there): the log dir goes offline with ``reason`` in its line,
    DescribeLogDirs names it, produce answers KAFKA_STORAGE_ERROR; with the directory gone a restart serves every
    key's latest value and leaves no ``.swap`` file."""
    from klog.protocol import ApiKey
    from klog.records import encode_batch
    from klog.testing.wire import WireClient
    from test_broker_robustness import log_lines_since

    storage_error = 56   # KAFKA_STORAGE_ERROR
    data = data_dir_for(tmp_path)
    # log.segment.delete.delay.ms is 60 s: old segments are renamed .deleted, a rename a directory can be in the way of
    with BrokerProcess(data, CLEANER_CONFIG) as broker:
        create_topic(broker.bootstrap_servers, topic,
                     compacted_configs(8_192, **{"min.compaction.lag.ms": "3600000"}))
        latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=100, rounds=6, value_bytes=60)
        produce_fillers(broker.bootstrap_servers, topic, 20_000)
        part = os.path.join(data, f"{topic}-0")
        segments = sorted(f for f in os.listdir(part) if f.endswith(".log"))
        assert len(segments) > 1, segments   # the first one is sealed: it is cleaned
        obstacle = os.path.join(part, segments[0] + obstacle_suffix)
        os.mkdir(obstacle)
        open(os.path.join(obstacle, "in-the-way"), "w").close()
        alter_topic(broker.bootstrap_servers, topic, min_compaction_lag_ms="0")   # cleaning starts
        with WireClient(broker.host, broker.port) as wire:
            deadline = time.monotonic() + 60
            while True:
                errors = {r.log_dir: r.error_code
                          for r in wire.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}).results}
                if errors == {data: storage_error}:
                    break
                assert time.monotonic() < deadline, (errors, broker.lines[-20:])
                time.sleep(0.1)
            produced = wire.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                    {"name": topic, "partition_data": [
                        {"index": 0, "records": encode_batch([{"key": b"key-0", "value": b"late"}])}]}]})
            assert produced.responses[0].partition_responses[0].error_code == storage_error
        offline = log_lines_since(broker, 0, f"log dir {data} is offline")
        assert offline and reason in offline[0], broker.lines[-20:]
    os.remove(os.path.join(obstacle, "in-the-way"))
    os.rmdir(obstacle)
    with BrokerProcess(data, CLEANER_CONFIG) as broker:
        records = read_all(broker.bootstrap_servers, topic)
    check_compacted(records, latest, end)
    assert not [f for f in os.listdir(part) if f.endswith(".swap")]


def test_a_cleaner_swap_failing_past_its_commit_point_takes_the_log_dir_offline_and_a_restart_completes_it(tmp_path):
    """A swap whose old segment cannot be retired (a directory in the way of its `.deleted` name) failed after its
    commit point: the log is closed and its log dir goes offline, as Kafka's cleaner takes the dir offline on an
    IOException, so produce answers KAFKA_STORAGE_ERROR and DescribeLogDirs names the dir. (Before, the log stayed
    online taking writes, the swapped groups' offsets missing from it until a restart.) The restart completes the
    swap: every key's latest value is read."""
    _swap_failure_takes_the_log_dir_offline(tmp_path, "swap-fails", ".deleted", "rename for delete")


def test_a_cleaner_swap_rolled_back_before_its_commit_point_takes_the_log_dir_offline(tmp_path):
    """A swap whose commit fails (a directory in the way of the first segment's `.log.swap` name) is rolled back,
    and its log dir goes offline, as Kafka's cleaner takes the dir offline on any IOException. (Before, the dir
    stayed online, the partition silently never cleaned again until a restart.) The restart serves every key's
    latest value."""
    _swap_failure_takes_the_log_dir_offline(tmp_path, "swap-rolled-back", ".swap", "Is a directory")


def test_cleanup_policy_changed_to_compact_at_runtime_starts_cleaning(broker):
    topic = "altered"
    create_topic(broker.bootstrap_servers, topic, {"segment.bytes": "8192"})
    latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=50, rounds=5, value_bytes=50)
    produce_fillers(broker.bootstrap_servers, topic, 20_000)
    time.sleep(0.5)
    assert cleaner_checkpoint(broker.data_dir, topic) == -1, "a delete-policy topic is never cleaned"
    alter_topic(broker.bootstrap_servers, topic, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    wait_cleaned(broker.data_dir, topic, end)
    check_compacted(read_all(broker.bootstrap_servers, topic), latest, end)


def test_min_compaction_lag_ms_holds_records_back_until_altered_at_runtime(broker):
    topic = "min-lag"
    create_topic(broker.bootstrap_servers, topic, compacted_configs(8_192, **{"min.compaction.lag.ms": "3600000"}))
    latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=50, rounds=5, value_bytes=50)
    produce_fillers(broker.bootstrap_servers, topic, 20_000)
    time.sleep(1.0)  # ten cleaner backoffs
    assert cleaner_checkpoint(broker.data_dir, topic) == -1, "records younger than min.compaction.lag.ms stay"
    alter_topic(broker.bootstrap_servers, topic, min_compaction_lag_ms="0")
    wait_cleaned(broker.data_dir, topic, end)
    check_compacted(read_all(broker.bootstrap_servers, topic), latest, end)


def test_max_compaction_lag_ms_cleans_a_log_under_min_cleanable_dirty_ratio(broker):
    topic = "max-lag"
    create_topic(broker.bootstrap_servers, topic, compacted_configs(8_192))
    latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=50, rounds=5, value_bytes=50)
    produce_fillers(broker.bootstrap_servers, topic, 20_000)
    wait_cleaned(broker.data_dir, topic, end)
    # A little more: far under a dirty ratio of 0.99, so it stays dirty...
    alter_topic(broker.bootstrap_servers, topic, min_cleanable_dirty_ratio="0.99")
    more, end2 = produce_scenario(broker.bootstrap_servers, topic, keys=50, rounds=1, value_bytes=50, seed=8)
    produce_fillers(broker.bootstrap_servers, topic, 10_000)
    cleaned_to = cleaner_checkpoint(broker.data_dir, topic)
    time.sleep(1.5)
    assert cleaner_checkpoint(broker.data_dir, topic) == cleaned_to < end2
    # ...until its records are older than max.compaction.lag.ms.
    alter_topic(broker.bootstrap_servers, topic, max_compaction_lag_ms="1000")
    wait_cleaned(broker.data_dir, topic, end2)
    check_compacted(read_all(broker.bootstrap_servers, topic), {**latest, **more}, end2)


def test_tombstones_go_after_delete_retention_ms(broker):
    topic = "tombstones"
    create_topic(broker.bootstrap_servers, topic, compacted_configs(8_192, **{"delete.retention.ms": "0"}))
    latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=60, rounds=4, value_bytes=50)
    produce_fillers(broker.bootstrap_servers, topic, 20_000)
    wait_cleaned(broker.data_dir, topic, end)
    # The first pass set the delete horizon (now + 0 ms); the next pass removes the tombstones.
    produce_fillers(broker.bootstrap_servers, topic, 20_000)
    deadline = time.monotonic() + 30
    while True:
        records = scenario_records(read_all(broker.bootstrap_servers, topic))
        if all(v is not None for _, _, v in records) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert {k: v for _, k, v in records} == {k: v for k, v in latest.items() if v is not None}


def test_compact_delete_removes_expired_segments_and_compacts_the_rest(tmp_path):
    topic = "compact-delete"
    config = {**CLEANER_CONFIG, "log.retention.check.interval.ms": 200}
    with BrokerProcess(data_dir_for(tmp_path), config) as broker:
        # Today's records wait for min.compaction.lag.ms: cleaning must not merge them into the old segments (a
        # cleaned segment takes the largest timestamp of its group, and retention.ms would keep the old records).
        create_topic(broker.bootstrap_servers, topic, compacted_configs(8_192, **{
            "cleanup.policy": "compact,delete", "retention.ms": "3600000", "min.compaction.lag.ms": "3600000"}))
        # Records written a day ago (CreateTime), past retention.ms, under their own keys...
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 5})
        day_ago = int(time.time() * 1000) - 86_400_000
        for i in range(600):
            producer.produce(topic, key=b"old-%d" % (i % 40), value=b"o" * 100, partition=0, timestamp=day_ago)
        assert producer.flush(30) == 0
        # ...then today's updates: retention removes the old segments...
        latest, end = produce_scenario(broker.bootstrap_servers, topic, keys=50, rounds=5, value_bytes=50)
        produce_fillers(broker.bootstrap_servers, topic, 20_000)
        deadline = time.monotonic() + 30
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks"})
        try:
            while (low := consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)[0]) == 0:
                assert time.monotonic() < deadline, "retention.ms never removed the day-old segments"
                time.sleep(0.2)
        finally:
            consumer.close()
        # ...and the cleaner compacts what stays.
        alter_topic(broker.bootstrap_servers, topic, min_compaction_lag_ms="0")
        wait_cleaned(broker.data_dir, topic, end)
        records = read_all(broker.bootstrap_servers, topic)
    assert records[0][0] >= low > 0
    old = [k for _, k, _ in records if k.startswith(b"old-")]
    assert len(old) == len(set(old)) < 40, "what retention left of the old keys is compacted too"
    check_compacted([r for r in records if not r[1].startswith(b"old-")], latest, end)


def test_an_idempotent_producers_sequence_survives_cleaning_and_a_kill(tmp_path):
    """Every record of an idempotent producer is superseded by another producer's, so cleaning empties its batches;
    its last batch stays (an empty header). After a SIGKILL the broker replays the log from its last producer-state
    snapshot (taken at a clean restart while the topic was empty) through the cleaned range, and still knows the
    producer's last sequence: a retry of that batch is a duplicate, a gap is refused and the next sequence is
    accepted."""
    from klog.protocol import ApiKey
    from klog.records import encode_batch
    from klog.testing.wire import WireClient
    from test_broker_robustness import fetch_all

    topic = "sequences"
    config = {**CLEANER_CONFIG, "log.flush.offset.checkpoint.interval.ms": 3_600_000}
    broker = BrokerProcess(data_dir_for(tmp_path), config).start()
    try:
        create_topic(broker.bootstrap_servers, topic, compacted_configs(8_192))
        broker.restart()  # the snapshot: the topic at offset 0; none is taken again before the kill

        def produce(wire: WireClient, batch: bytes) -> tuple[int, int]:
            body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            r = wire.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
            return r.error_code, r.base_offset

        with WireClient(broker.host, broker.port) as wire:
            init = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                                             "producer_id": -1, "producer_epoch": -1})
            pid, epoch = init.producer_id, init.producer_epoch
            batches = [encode_batch([{"key": b"key-%d" % i, "value": b"idempotent-%d" % n} for i in range(5)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=5 * n) for n in range(4)]
            last_offset = [produce(wire, b) for b in batches][-1][1]
        latest = {b"key-%d" % i: b"plain" for i in range(5)}
        plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        for key, value in latest.items():
            plain.produce(topic, key=key, value=value, partition=0)
        assert plain.flush(30) == 0
        produce_fillers(broker.bootstrap_servers, topic, 20_000)
        wait_cleaned(broker.data_dir, topic, last_offset + 5)
        assert {k: v for _, k, v in scenario_records(read_all(broker.bootstrap_servers, topic))} == latest
        with WireClient(broker.host, broker.port) as wire:
            kept = [(b.base_offset, b.base_sequence, len(b.records))
                    for b in fetch_all(wire, topic, allow_compacted=True)
                    if b.producer_id == pid]
        assert kept == [(last_offset, 15, 0)], "only the producer's last batch stays, emptied"
        broker.kill()
        broker.config["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port}"
        broker.start()
        with WireClient(broker.host, broker.port) as wire:
            assert produce(wire, batches[-1]) == (0, last_offset), "the retry is recognised, not appended"
            gap = encode_batch([{"key": b"key-0", "value": b"gap"}], producer_id=pid, producer_epoch=epoch,
                               base_sequence=99)
            assert produce(wire, gap)[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
            after = encode_batch([{"key": b"key-0", "value": b"next"}], producer_id=pid, producer_epoch=epoch,
                                 base_sequence=20)
            assert produce(wire, after)[0] == 0
    finally:
        broker.stop()


@pytest.mark.java
@pytest.mark.long
def test_apache_kafka_ends_with_the_same_latest_values(tmp_path):
    from klog.testing.kafka import KafkaStartError, apache_kafka

    results = {}
    segment = 1_048_576  # Kafka 4's smallest segment.bytes
    try:
        kafka = apache_kafka(tmp_path / "kafka", config={"log.cleaner.backoff.ms": 100})
        bootstrap = kafka.__enter__()
    except KafkaStartError as exc:
        pytest.skip(str(exc))
    try:
        results["kafka"] = run_same_scenario(bootstrap, segment, None)
    finally:
        kafka.__exit__(None, None, None)
    with BrokerProcess(data_dir_for(tmp_path / "klog"), CLEANER_CONFIG) as broker:
        results["klog"] = run_same_scenario(broker.bootstrap_servers, segment, broker.data_dir)
    assert results["klog"] == results["kafka"]


def run_same_scenario(bootstrap: str, segment_bytes: int, data_dir: str | None) -> dict[bytes, bytes | None]:
    topic = "same-scenario"
    create_topic(bootstrap, topic, compacted_configs(segment_bytes))
    latest, end = produce_scenario(bootstrap, topic, keys=400, rounds=6, value_bytes=1000)
    produce_fillers(bootstrap, topic, segment_bytes + 100_000)
    deadline = time.monotonic() + 120
    while True:  # Kafka's cleaner is observed through reads: clean once each key appears once
        records = scenario_records(read_all(bootstrap, topic))
        if len(records) == len(latest) or time.monotonic() > deadline:
            break
        time.sleep(1)
    check_compacted(records, latest, end)
    return {k: v for _, k, v in records}
