"""Apache Kafka's Java share consumer (``KafkaShareConsumer``, Kafka 4.3.1, tests/java/ShareClient.java) on klog and
on Apache Kafka 4.3 from the same properties, acknowledging explicitly and committing with commitSync: a RELEASEd
record comes back with delivery count 2, ACCEPTed and REJECTed ones never again, and two consumers of one group
that ACCEPT everything see every record exactly once between them. Both brokers must print the same lines."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from klog.testing.kafka import find_kafka_libs, one_broker
from klog.testing.kafka_tools import compile_java, java_available, kafka_libs_dir

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parent.parent
PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share", "num.partitions": 1,
              "offsets.topic.num.partitions": 3, "group.share.heartbeat.interval.ms": 500,
              "group.share.min.heartbeat.interval.ms": 500}
#: bound on the Java program (one JVM: a producer, an admin client, three share consumers)
JAVA_TIMEOUT_S = 200

EXPECTED = [
    "RECORDS DELIVERED 30",
    "ACCEPTED 10 DELIVERY COUNTS [[1]]",
    "REJECTED 10 DELIVERY COUNTS [[1]]",
    "RELEASED 10 DELIVERY COUNTS [[1, 2]]",
    "COMMIT ERRORS none",
    "ALL ACCEPT DISTINCT 100 DELIVERIES 100 REPEATED 0",
]


@pytest.fixture(scope="module")
def share_client(tmp_path_factory) -> Path:
    libs = kafka_libs_dir()
    if not java_available() or libs is None:
        pytest.skip("needs java and the Apache Kafka jars")
    return compile_java(REPO / "tests" / "java" / "ShareClient.java", tmp_path_factory.mktemp("share-client-classes"),
                        libs=libs)


# Kafka's side (a broker start and the same JVM run, ~50 s here) runs in the nightly suite: CI's time budget
@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_java_share_consumer_acknowledges_and_redelivers_as_on_kafka(kind, share_client, tmp_path):
    with one_broker(kind, tmp_path, PROPERTIES) as bootstrap:
        result = subprocess.run(["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                 "-Dlog4j2.level=ERROR", "-cp", f"{share_client}:{find_kafka_libs()}/*",
                                 "ShareClient", bootstrap, uuid.uuid4().hex[:6]],
                                capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines() == EXPECTED
