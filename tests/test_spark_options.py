"""Options, offsets JSON and planning of the klog Spark source: pure Python, no Spark session."""

from __future__ import annotations

import json

import pytest

from klog.spark.errors import KlogSparkOptionError
from klog.spark.offsets import TopicPartition, format_offsets_json, offsets_from_json_obj, offsets_to_json_obj
from klog.spark.options import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    SpecificOffsets,
    SpecificTimestamps,
    parse_sink_options,
    parse_source_options,
)
from klog.spark.planning import OffsetRange, rate_limit, split_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
T = TopicPartition


def batch(**opts):
    return parse_source_options({**BOOT, **opts}, streaming=False)


def stream(**opts):
    return parse_source_options({**BOOT, **opts}, streaming=True)


# --- offsets JSON ---------------------------------------------------------------------------


def test_offsets_json_is_sorted_with_string_partition_keys_like_spark():
    offsets = {T("b", 10): 5, T("a", 2): 7, T("b", 2): 1, T("a", 0): -2}
    assert format_offsets_json(offsets) == '{"a":{"0":-2,"2":7},"b":{"2":1,"10":5}}'
    # the JVM hands offsets back as JSON: string keys come back and parse to the same mapping
    assert offsets_from_json_obj(json.loads(json.dumps(offsets_to_json_obj(offsets)))) == offsets


@pytest.mark.parametrize(
    "bad",
    ['{"t":{"x":1}}', '{"t":{"0":"1"}}', '{"t":[0,1]}', "[1]", '{"t":{"0":1.5}}', '{"t":{"-1":3}}'],
)
def test_malformed_offsets_json_names_the_option(bad):
    with pytest.raises(KlogSparkOptionError, match="startingOffsets"):
        batch(subscribe="t", startingOffsets=bad)


def test_offsets_json_rejects_offsets_below_minus_two():
    with pytest.raises(KlogSparkOptionError, match="offset -3 of t-0"):
        batch(subscribe="t", startingOffsets='{"t":{"0":-3}}')


# --- subscription and bootstrap ---------------------------------------------------------------


def test_exactly_one_subscription_option_is_required():
    with pytest.raises(KlogSparkOptionError, match="One of the following options must be specified"):
        parse_source_options(BOOT, streaming=False)
    with pytest.raises(KlogSparkOptionError, match="Only one of .* subscribe, subscribePattern"):
        batch(subscribe="a", subscribePattern="a.*")


def test_subscribe_assign_and_pattern_are_parsed():
    assert batch(subscribe=" a, b ,a").subscription.topics == ("a", "b")
    assign = batch(assign='{"x":[1,0],"y":[3]}').subscription
    assert assign.kind == "assign" and set(assign.partitions) == {T("x", 0), T("x", 1), T("y", 3)}
    pattern = batch(subscribePattern="ord.*").subscription
    assert pattern.matches("orders") and not pattern.matches("xorders")


@pytest.mark.parametrize("bad", ['{"x":0}', "[]", "{}", '{"x":[-1]}', "not json"])
def test_bad_assign_json_is_refused(bad):
    with pytest.raises(KlogSparkOptionError, match="assign"):
        batch(assign=bad)


def test_bootstrap_servers_required_unless_path_given_and_both_spellings_work():
    with pytest.raises(KlogSparkOptionError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "t"}, streaming=False)
    assert parse_source_options({"subscribe": "t", "bootstrap.servers": "h:1,g:2"}, streaming=False).bootstrap_servers == ("h:1", "g:2")
    opts = parse_source_options({"subscribe": "t", "path": "/data/kafka"}, streaming=False)
    assert opts.path == "/data/kafka" and opts.bootstrap_servers == ()
    with pytest.raises(KlogSparkOptionError, match="host:port"):
        parse_source_options({"subscribe": "t", "kafka.bootstrap.servers": "nohost"}, streaming=False)


def test_option_names_are_case_insensitive():
    opts = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubScribe": "t", "STARTINGOFFSETS": "earliest", "failondataloss": "FALSE"},
        streaming=True,
    )
    assert opts.subscription.topics == ("t",) and isinstance(opts.starting, EarliestOffsets)
    assert opts.fail_on_data_loss is False


# --- starting/ending offsets ------------------------------------------------------------------


def test_defaults_are_earliest_for_batch_and_latest_for_streams():
    assert isinstance(batch(subscribe="t").starting, EarliestOffsets)
    assert isinstance(batch(subscribe="t").ending, LatestOffsets)
    assert isinstance(stream(subscribe="t").starting, LatestOffsets)


def test_batch_queries_refuse_latest_start_and_earliest_end():
    with pytest.raises(KlogSparkOptionError, match="can't be latest"):
        batch(subscribe="t", startingOffsets="latest")
    with pytest.raises(KlogSparkOptionError, match="t-1 can't be latest"):
        batch(subscribe="t", startingOffsets='{"t":{"0":0,"1":-1}}')
    with pytest.raises(KlogSparkOptionError, match="can't be earliest"):
        batch(subscribe="t", endingOffsets="earliest")
    with pytest.raises(KlogSparkOptionError, match="t-0 can't be earliest"):
        batch(subscribe="t", endingOffsets='{"t":{"0":-2}}')


def test_streams_refuse_ending_offsets():
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(KlogSparkOptionError, match="not valid in streaming queries"):
            stream(subscribe="t", **{name: "latest" if name == "endingOffsets" else "1"})


def test_timestamp_options_take_precedence_like_spark():
    o = batch(subscribe="t", startingOffsets="earliest", startingTimestamp="1000")
    assert o.starting == GlobalTimestamp(1000)
    o = batch(subscribe="t", startingTimestamp="1000", startingOffsetsByTimestamp='{"t":{"0":5}}')
    assert o.starting == SpecificTimestamps({T("t", 0): 5})
    assert batch(subscribe="t", endingTimestamp="77").ending == GlobalTimestamp(77)
    assert batch(subscribe="t", startingOffsets='{"t":{"0":3}}').starting == SpecificOffsets({T("t", 0): 3})
    with pytest.raises(KlogSparkOptionError, match="startingTimestamp"):
        batch(subscribe="t", startingTimestamp="yesterday")
    with pytest.raises(KlogSparkOptionError, match="startingOffsetsByTimestampStrategy"):
        batch(subscribe="t", startingOffsetsByTimestampStrategy="maybe")


@pytest.mark.parametrize(
    "name,value",
    [("minPartitions", "0"), ("minPartitions", "x"), ("maxOffsetsPerTrigger", "-5"), ("maxRecordsPerPartition", "0")],
)
def test_counts_must_be_positive_integers(name, value):
    with pytest.raises(KlogSparkOptionError, match=name):
        stream(subscribe="t", **{name: value})


def test_kafka_params_the_source_manages_itself_are_refused():
    for key in ("auto.offset.reset", "key.deserializer", "enable.auto.commit"):
        with pytest.raises(KlogSparkOptionError, match=key):
            batch(subscribe="t", **{f"kafka.{key}": "x"})
    with pytest.raises(KlogSparkOptionError, match="isolation.level"):
        batch(subscribe="t", **{"kafka.isolation.level": "read_everything"})
    with pytest.raises(KlogSparkOptionError, match="minOffsetsPerTrigger"):
        stream(subscribe="t", minOffsetsPerTrigger="10")


def test_tls_and_sasl_settings_reach_the_client_and_unknown_ones_are_refused():
    from klog.spark.options import security_settings

    opts = batch(subscribe="t", **{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                                   "kafka.sasl.jaas.config": "x required username=\"u\" password=\"p\";",
                                   "kafka.ssl.truststore.location": "/ca.pem"})
    assert dict(security_settings(opts.kafka_params)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "x required username=\"u\" password=\"p\";", "ssl.truststore.location": "/ca.pem"}
    with pytest.raises(KlogSparkOptionError, match="security.protocol"):
        batch(subscribe="t", **{"kafka.security.protocol": "KERBEROS"})
    with pytest.raises(KlogSparkOptionError, match="sasl.kerberos.service.name"):
        parse_sink_options({**BOOT, "kafka.sasl.kerberos.service.name": "kafka"})
    assert batch(subscribe="t", **{"kafka.security.protocol": "plaintext"}).subscription.topics == ("t",)


def test_max_offsets_per_trigger_is_ignored_for_batch_reads_like_spark():
    assert batch(subscribe="t", maxOffsetsPerTrigger="10").max_offsets_per_trigger is None
    assert stream(subscribe="t", maxOffsetsPerTrigger="10").max_offsets_per_trigger == 10


def test_sink_options():
    o = parse_sink_options({**BOOT, "topic": "out", "kafka.acks": "1", "kafka.compression.type": "zstd"})
    assert (o.topic, o.acks, o.compression) == ("out", 1, "zstd")
    assert parse_sink_options(BOOT).acks == -1
    with pytest.raises(KlogSparkOptionError, match="compression.type"):
        parse_sink_options({**BOOT, "kafka.compression.type": "brotli"})
    with pytest.raises(KlogSparkOptionError, match="value.serializer"):
        parse_sink_options({**BOOT, "kafka.value.serializer": "x"})


def test_exactly_once_sink_options():
    """exactlyOnce=true: acks must be all, the sink derives the transactional ids (a given one is refused), the
    prefix and kafka.transaction.timeout.ms are taken."""
    assert parse_sink_options(BOOT).exactly_once is False
    o = parse_sink_options({**BOOT, "exactlyonce": "TRUE", "transactionalIdPrefix": "orders-sink",
                            "kafka.transaction.timeout.ms": "120000"})
    assert (o.exactly_once, o.transactional_id_prefix, o.transaction_timeout_ms) == (True, "orders-sink", 120000)
    assert parse_sink_options({**BOOT, "exactlyOnce": "true"}).transactional_id_prefix == "klog-spark"
    with pytest.raises(KlogSparkOptionError, match="acks"):
        parse_sink_options({**BOOT, "exactlyOnce": "true", "kafka.acks": "1"})
    with pytest.raises(KlogSparkOptionError, match="transactional.id"):
        parse_sink_options({**BOOT, "kafka.transactional.id": "mine"})
    with pytest.raises(KlogSparkOptionError, match="exactlyOnce"):
        parse_sink_options({**BOOT, "exactlyOnce": "yes"})
    with pytest.raises(KlogSparkOptionError, match="transactionalIdPrefix"):
        parse_sink_options({**BOOT, "exactlyOnce": "true", "transactionalIdPrefix": " "})


# --- planning ---------------------------------------------------------------------------------


def R(tp: str, a: int, b: int) -> OffsetRange:
    topic, p = tp.split("-")
    return OffsetRange(topic, int(p), a, b)


def test_one_task_per_nonempty_partition_without_min_partitions():
    assert split_ranges([R("t-0", 0, 10), R("t-1", 5, 5), R("t-2", 0, 1)]) == [R("t-0", 0, 10), R("t-2", 0, 1)]


def test_min_partitions_splits_big_partitions_proportionally_like_spark():
    # Spark's KafkaOffsetRangeCalculator: 3 ranges of 1, 2 and 97 offsets with minPartitions 10
    # give parts max(round(size / total * 10), 1) = 1, 1 and 10 (Spark's own test case).
    got = split_ranges([R("t-1", 0, 1), R("t-2", 0, 2), R("t-3", 0, 97)], min_partitions=10)
    assert got[:2] == [R("t-1", 0, 1), R("t-2", 0, 2)]
    t3 = got[2:]
    assert len(t3) == 10
    assert t3[0].from_offset == 0 and t3[-1].until_offset == 97
    assert all(a.until_offset == b.from_offset for a, b in zip(t3, t3[1:]))
    assert {r.size for r in t3} == {9, 10}


def test_max_records_per_partition_caps_every_task():
    got = split_ranges([R("t-0", 100, 1100)], max_records_per_partition=300)
    assert [r.size for r in got] == [250, 250, 250, 250]
    assert got[0].from_offset == 100 and got[-1].until_offset == 1100


def test_rate_limit_shares_the_cap_proportionally_and_never_starves_a_partition():
    start = {T("t", 0): 0, T("t", 1): 0}
    latest = {T("t", 0): 1000, T("t", 1): 10}
    got = rate_limit(101, start, latest, {})
    assert got == {T("t", 0): 100, T("t", 1): 1}  # 101*1000/1010 = 100; 101*10/1010 = 1
    # a new partition starts from its earliest offset
    got = rate_limit(10, {T("t", 0): 0}, {T("t", 0): 100, T("t", 1): 100}, {T("t", 1): 90})
    assert got[T("t", 1)] <= 100 and got[T("t", 1)] > 90
    # nothing new: latest unchanged
    assert rate_limit(5, latest, latest, {}) == latest


def test_read_committed_reaches_the_client_and_needs_the_brokers():
    from klog.spark.options import security_settings

    opts = batch(subscribe="t", **{"kafka.isolation.level": "READ_COMMITTED"})
    assert ("isolation.level", "read_committed") in security_settings(opts.kafka_params)
    assert "isolation.level" not in dict(security_settings(batch(subscribe="t").kafka_params))
    with pytest.raises(KlogSparkOptionError, match="path"):
        parse_source_options({"path": "/tmp/x", "subscribe": "t", "kafka.isolation.level": "read_committed"},
                             streaming=False)
