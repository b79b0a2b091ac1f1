"""kcat (librdkafka 2.0.2, Debian's) against a real klog-broker process.

Old librdkafka enables features from single-version probes (Produce 0 for compression at all, Produce 3 and
Fetch 4 for record batch v2, Produce 7 and Fetch 10 for zstd, ...); these tests check the batches it actually
wrote to find out whether it kept compression and magic v2 on.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from klog.client import AdminClient, NewTopic
from klog.testing.process import BrokerProcess
from klog.testing.wire import fetch_raw

pytestmark = pytest.mark.timeout(120)

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("kcat"), {"num.partitions": 1}) as proc:
        yield proc


def kcat(broker, *args, input=None, timeout=60):
    result = subprocess.run(["kcat", "-b", broker.bootstrap_servers, *args], input=input, capture_output=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout


def topic_name():
    return f"kcat-{uuid.uuid4().hex[:10]}"


def test_kcat_reports_the_api_versions_it_detected(broker):
    out = kcat(broker, "-L", "-J")
    metadata = json.loads(out)
    assert metadata["brokers"][0]["id"] == 1
    assert metadata["controllerid"] == 1


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_round_trip_keeps_the_codec(broker, codec):
    topic = topic_name()
    # made first: a topic kcat's producer makes by asking for it is unknown in the first answer (as on Kafka), and
    # librdkafka 2.0.2 then wrote one batch uncompressed beside the compressed ones (seen with gzip, lz4, zstd)
    with AdminClient(broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    lines = "".join(f"key{i}:value {i} {codec}\n" for i in range(50)).encode()
    kcat(broker, "-P", "-t", topic, "-K", ":", "-X", f"compression.codec={codec}", "-X", "linger.ms=50",
         input=lines)
    out = kcat(broker, "-C", "-t", topic, "-e", "-q", "-f", "%k=%s\n")
    assert out.decode().splitlines() == [f"key{i}=value {i} {codec}" for i in range(50)]
    batches = fetch_raw(broker.host, broker.port, topic)
    # librdkafka 2.0.2 really compressed (it saw Produce 0 and 7 in the advertised ranges) and wrote v2
    assert {b.attributes & 0x07 for b in batches} == {CODEC_IDS[codec]}
    assert {b.magic for b in batches} == {2}


def test_kcat_null_values_keys_and_headers(broker):
    topic = topic_name()
    kcat(broker, "-P", "-t", topic, "-K", ":", "-Z", "-H", "h1=one", "-H", "h2=two", input=b"k1:\n:v2\nk3:v3\n")
    out = kcat(broker, "-C", "-t", topic, "-e", "-q", "-Z", "-f", "%k|%s|%h\n").decode().splitlines()
    assert out == ["k1|NULL|h1=one,h2=two", "NULL|v2|h1=one,h2=two", "k3|v3|h1=one,h2=two"]
    records = [r for b in fetch_raw(broker.host, broker.port, topic) for r in b.records]
    assert [(r.key, r.value) for r in records] == [(b"k1", None), (None, b"v2"), (b"k3", b"v3")]
    assert records[0].headers == [("h1", b"one"), ("h2", b"two")]


def test_kcat_many_partitions_and_metadata(broker):
    topic = topic_name()
    subprocess.run(["kcat", "-b", broker.bootstrap_servers, "-L", "-t", topic], capture_output=True, timeout=30)
    from klog.testing.wire import WireClient

    with WireClient(broker.host, broker.port) as wire:
        response = wire.request(37, 1, {"topics": [{"name": topic, "count": 6, "assignments": None}],
                                        "timeout_ms": 5000, "validate_only": False})
        assert response.results[0].error_code == 0
    for partition in range(6):
        kcat(broker, "-P", "-t", topic, "-p", str(partition), input=f"to {partition}\n".encode())
    metadata = json.loads(kcat(broker, "-L", "-J", "-t", topic))
    assert len(metadata["topics"][0]["partitions"]) == 6
    for partition in range(6):
        out = kcat(broker, "-C", "-t", topic, "-p", str(partition), "-e", "-q", "-f", "%p:%s\n")
        assert out.decode() == f"{partition}:to {partition}\n"


def test_kcat_large_message_near_message_max_bytes(broker):
    topic = topic_name()
    value = b"L" * 1_000_000       # default message.max.bytes is 1048588
    kcat(broker, "-P", "-t", topic, "-D", "\\n\\n", "-X", "message.max.bytes=1048588", input=value + b"\n\n")
    out = kcat(broker, "-C", "-t", topic, "-e", "-q", "-D", "")
    assert out == value


def test_kcat_query_offsets_by_timestamp(broker):
    topic = topic_name()
    kcat(broker, "-P", "-t", topic, input=b"a\nb\n")
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    kcat(broker, "-P", "-t", topic, input=b"c\n")
    out = kcat(broker, "-Q", "-t", f"{topic}:0:{mark}").decode()
    assert "offset 2" in out, out
    out = kcat(broker, "-C", "-t", topic, "-o", f"s@{mark}", "-e", "-q", "-f", "%s\n")
    assert out == b"c\n"


def test_kcat_consumes_from_an_offset_and_the_end(broker):
    topic = topic_name()
    kcat(broker, "-P", "-t", topic, input=b"".join(b"m%d\n" % i for i in range(10)))
    assert kcat(broker, "-C", "-t", topic, "-o", "7", "-e", "-q", "-f", "%o=%s\n") == b"7=m7\n8=m8\n9=m9\n"
    assert kcat(broker, "-C", "-t", topic, "-o", "-2", "-e", "-q", "-f", "%s\n") == b"m8\nm9\n"
