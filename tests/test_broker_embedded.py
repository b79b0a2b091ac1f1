"""``klog.Broker``: the real broker in-process on its own thread, and the ``klog_broker`` pytest fixture."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import klog
from klog.broker.config import ConfigError

pytestmark = pytest.mark.timeout(120)


def round_trip(servers, topic, n=10):
    producer = Producer({"bootstrap.servers": servers})
    for i in range(n):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "unused"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 15
    while len(values) < n and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_with_block_runs_a_broker_on_a_free_port_in_a_temp_dir():
    with klog.Broker() as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        data_dir = broker.data_dir
        assert os.path.isdir(data_dir)
        assert round_trip(broker.bootstrap_servers, "embedded") == [b"v%d" % i for i in range(10)]
    assert not os.path.exists(data_dir)                   # the temp dir goes with the broker
    with pytest.raises(RuntimeError):
        broker.bootstrap_servers


def test_kafka_config_names_and_a_kept_data_dir(tmp_path):
    with klog.Broker(str(tmp_path), config={"num.partitions": 4, "auto.create.topics.enable": True}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        # as Kafka, the Metadata request that auto-creates a topic is answered UNKNOWN_TOPIC_OR_PARTITION and the
        # topic is made in the background: a client asks again
        deadline = time.monotonic() + 10
        while True:
            metadata = producer.list_topics("four", timeout=10)
            if metadata.topics["four"].partitions or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(metadata.topics["four"].partitions) == 4
    assert (tmp_path / "__cluster_metadata-0").is_dir()    # a given data dir is kept


def test_two_brokers_in_one_process():
    with klog.Broker() as first, klog.Broker() as second:
        assert first.port != second.port
        assert round_trip(first.bootstrap_servers, "a", 3) == [b"v0", b"v1", b"v2"]
        assert round_trip(second.bootstrap_servers, "b", 2) == [b"v0", b"v1"]


def test_bad_config_fails_before_starting():
    with pytest.raises(ConfigError, match="'log.segmnet.bytes'"):
        klog.Broker(config={"log.segmnet.bytes": 1})


def test_start_failure_is_raised_from_start(tmp_path):
    with klog.Broker(str(tmp_path)) as broker:
        port = broker.port
        clash = klog.Broker(str(tmp_path / "other"), port=port)
        with pytest.raises(RuntimeError, match="failed to start"):
            clash.start()


def test_the_klog_broker_fixture_is_a_running_broker(klog_broker):
    assert round_trip(klog_broker.bootstrap_servers, "fixture", 2) == [b"v0", b"v1"]


def test_a_broker_refused_for_its_config_leaves_no_temporary_data_dir(tmp_path, monkeypatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ConfigError, match="num.partitions"):
        klog.Broker(config={"num.partitions": "x"})
    assert list(tmp_path.iterdir()) == []
