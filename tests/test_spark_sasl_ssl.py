"""klog's Spark source and sink against a SASL_SSL cluster, with the ``kafka.``-prefixed options Spark's own Kafka
source takes (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.type``/``location``): a batch write and read back, a streaming copy of one topic into
another, Spark's own Kafka source reading what klog's sink wrote with the same options, and a wrong password
failing the read with the cluster's authentication error. Real Spark (local), on a klog broker and on Apache Kafka
4.x started from the same properties; certificates made in the test."""

from __future__ import annotations

import contextlib
import uuid

import pytest

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package (the test extra)")
pytest.importorskip("pyspark", reason="the spark extra")

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from _spark_support import create_topic, spark_kafka_jars, spark_session  # noqa: E402
from klog.testing.certs import CertificateAuthority  # noqa: E402
from klog.testing.kafka import free_port, one_broker  # noqa: E402

pytestmark = [pytest.mark.java, pytest.mark.timeout(600)]

USER, PASSWORD = "spark-writer", "spark-writer-pw"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
ROWS = 60


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return {"ca": ca, "broker": ca.issue("broker")}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def cluster(request, tmp_path_factory, pki):
    """(plaintext bootstrap, SASL_SSL bootstrap) of a klog or Apache Kafka broker with a SCRAM-SHA-512 user."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port = free_port()
    props = {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"].keystore_file,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "connection.failed.authentication.delay.ms": 100,
    }
    with one_broker(request.param, root, props, extra_listeners=[f"SASL_SSL://127.0.0.1:{sasl_port}"]) as plaintext:
        admin = AdminClient({"bootstrap.servers": plaintext})
        upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        yield plaintext, f"127.0.0.1:{sasl_port}"


@pytest.fixture(scope="module")
def kafka_jars() -> list[str]:
    return spark_kafka_jars()


@pytest.fixture(scope="module")
def spark(kafka_jars):
    session = spark_session("klog-spark-sasl-ssl", jars=kafka_jars)
    yield session
    session.stop()


def _security(pki, password: str = PASSWORD) -> dict[str, str]:
    """The options a Spark user passes for SASL_SSL with SCRAM, as Spark's Kafka source documents them."""
    return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="{USER}" password="{password}";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": pki["ca"].ca_file}


def _with(builder, options: dict[str, str]):
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder


def _expected() -> set[tuple[str, str]]:
    return {(f"k{i}", f"value-{i}") for i in range(ROWS)}


def _write_rows(spark, sasl: str, topic: str, pki) -> None:
    """ROWS (key, value) rows written to ``topic`` with klog's sink over SASL_SSL."""
    rows = [(f"k{i}", f"value-{i}") for i in range(ROWS)]
    _with(spark.createDataFrame(rows, "key string, value string").write.mode("append").format("klog")
          .option("kafka.bootstrap.servers", sasl).option("topic", topic), _security(pki)).save()


def _read_rows(spark, fmt: str, sasl: str, topic: str, options: dict[str, str]) -> set[tuple[str, str]]:
    df = _with(spark.read.format(fmt).option("kafka.bootstrap.servers", sasl).option("subscribe", topic)
               .option("startingOffsets", "earliest").option("endingOffsets", "latest"), options).load()
    return {(r.key, r.value) for r in df.selectExpr("CAST(key AS STRING) AS key",
                                                   "CAST(value AS STRING) AS value").collect()}


def test_sink_writes_and_source_reads_back_over_sasl_ssl_with_kafka_prefixed_options(spark, cluster, pki):
    plaintext, sasl = cluster
    topic = f"spark-sasl-{uuid.uuid4().hex[:6]}"
    create_topic(plaintext, topic, 3)
    _write_rows(spark, sasl, topic, pki)
    assert _read_rows(spark, "klog", sasl, topic, _security(pki)) == _expected()

    # what the sink wrote, read by a SASL_SSL client that is not Spark
    consumer = Consumer({"bootstrap.servers": sasl, "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
                         "ssl.ca.location": pki["ca"].ca_file, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen: set[tuple[str, str]] = set()
    with contextlib.closing(consumer):
        consumer.subscribe([topic])
        for _ in range(60):
            for message in consumer.consume(100, timeout=1):
                assert message.error() is None, message.error()
                seen.add((message.key().decode(), message.value().decode()))
            if len(seen) == ROWS:
                break
    assert seen == _expected()


def test_spark_own_kafka_source_reads_what_the_sink_wrote_with_the_same_options(spark, cluster, pki, kafka_jars):
    if not kafka_jars:
        pytest.skip("Spark's Kafka connector jars could not be fetched from Maven Central")
    plaintext, sasl = cluster
    topic = f"spark-sasl-own-{uuid.uuid4().hex[:6]}"
    create_topic(plaintext, topic, 2)
    _write_rows(spark, sasl, topic, pki)
    assert _read_rows(spark, "kafka", sasl, topic, _security(pki)) == _expected()


def test_streaming_query_copies_a_topic_over_sasl_ssl(spark, cluster, pki, tmp_path):
    plaintext, sasl = cluster
    source, copy = (f"spark-sasl-{name}-{uuid.uuid4().hex[:6]}" for name in ("in", "copy"))
    create_topic(plaintext, source, 2)
    create_topic(plaintext, copy, 2)
    _write_rows(spark, sasl, source, pki)
    stream = _with(spark.readStream.format("klog").option("kafka.bootstrap.servers", sasl)
                   .option("subscribe", source).option("startingOffsets", "earliest"), _security(pki)).load()
    query = _with(stream.selectExpr("key", "value").writeStream.format("klog")
                  .option("kafka.bootstrap.servers", sasl).option("topic", copy)
                  .option("checkpointLocation", str(tmp_path / "checkpoint")), _security(pki)) \
        .trigger(availableNow=True).start()
    assert query.awaitTermination(240) and query.exception() is None
    assert _read_rows(spark, "klog", sasl, copy, _security(pki)) == _expected()


def test_a_wrong_password_fails_the_read_with_the_authentication_error(spark, cluster, pki):
    plaintext, sasl = cluster
    topic = f"spark-sasl-refused-{uuid.uuid4().hex[:6]}"
    create_topic(plaintext, topic, 1)
    with pytest.raises(Exception) as refused:
        _read_rows(spark, "klog", sasl, topic, _security(pki, password="not-the-password"))
    assert "SASL_AUTHENTICATION_FAILED" in str(refused.value) or "Authentication failed" in str(refused.value), \
        str(refused.value)[-2000:]
