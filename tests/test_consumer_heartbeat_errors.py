"""A consumer group member's heartbeats answered with an error Kafka's Java consumer treats as fatal: the error is
raised from the user's next poll (KIP-848: ``AbstractHeartbeatRequestManager.onErrorResponse`` hands it to poll as
an ``ErrorEvent``; classic: FENCED_INSTANCE_ID fails ``AbstractCoordinator``'s heartbeat thread, whose failure poll
raises), not retried in the background unseen. One broker with Kafka's StandardAuthorizer, klog and Apache Kafka
from the same properties; the consumers are User:ANONYMOUS and may read the topic (no ACL on it)."""

from __future__ import annotations

import time
import uuid

import pytest

import klog
from klog.client import AclBinding
from klog.protocol.errors import ErrorCode
from klog.testing.kafka import one_broker

pytestmark = pytest.mark.timeout(240)

PROPERTIES = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              # no ACL on a resource allows everyone: the brokers' own ANONYMOUS connections, and the consumer
              # until the DENY below
              "allow.everyone.if.no.acl.found": "true",
              "group.coordinator.rebalance.protocols": "classic,consumer",
              "group.consumer.heartbeat.interval.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 1000,
              "group.initial.rebalance.delay.ms": 0,
              "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 1}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def bootstrap(request, tmp_path_factory):
    with one_broker(request.param, tmp_path_factory.mktemp(request.param), PROPERTIES) as servers:
        yield servers


def _topic_with_a_record(bootstrap):
    topic = f"hb-{uuid.uuid4().hex[:6]}"
    with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
    with klog.Producer(bootstrap_servers=bootstrap) as p:
        p.send(topic, value=b"v")
        p.flush()
    return topic


def _read_the_record(consumer):
    deadline = time.monotonic() + 60
    while not consumer.poll(timeout=0.5):   # joined: the group's assignment gave the partition
        assert time.monotonic() < deadline, "the consumer never joined and read the record"


def _raised_by_a_poll(consumer, what):
    deadline = time.monotonic() + 30
    with pytest.raises(klog.client.KafkaError) as raised:
        while True:
            assert time.monotonic() < deadline, f"no poll raised {what}"
            consumer.poll(timeout=0.5)
    return raised.value


def test_group_authorization_failed_on_a_consumer_protocol_heartbeat_is_raised_from_poll(bootstrap):
    """Once joined, the consumer may no longer read the group (a DENY ACL): its next heartbeats are refused."""
    topic, group = _topic_with_a_record(bootstrap), f"g-{uuid.uuid4().hex[:6]}"
    consumer = klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, group_protocol="consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        _read_the_record(consumer)
        with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_acls([AclBinding("group", group, "User:ANONYMOUS", "read", "deny")])
        error = _raised_by_a_poll(consumer, "the group authorization failure")   # heartbeats every second
        assert error.code == ErrorCode.GROUP_AUTHORIZATION_FAILED, error
    finally:
        consumer.close()


def test_a_fenced_group_instance_id_on_a_classic_heartbeat_is_raised_from_poll(bootstrap):
    """A second consumer joins with the first one's group.instance.id and takes its place: the first one's next
    heartbeat is answered FENCED_INSTANCE_ID. (klog's member rejoined instead, fencing the other in turn.)"""
    topic, group = _topic_with_a_record(bootstrap), f"g-{uuid.uuid4().hex[:6]}"
    common = dict(bootstrap_servers=bootstrap, group_id=group, group_instance_id="static-1",
                  auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=500,
                  session_timeout_ms=10000)
    first = klog.Consumer(topic, **common)
    second = None
    try:
        _read_the_record(first)
        second = klog.Consumer(topic, **common)
        _read_the_record(second)
        error = _raised_by_a_poll(first, "the fenced group.instance.id")
        assert error.code == ErrorCode.FENCED_INSTANCE_ID, error
    finally:
        first.close()
        if second is not None:
            second.close()
