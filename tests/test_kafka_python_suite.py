"""kafka-python's own integration tests (``test/integration`` of its source distribution on PyPI, version 3.0.12 as
tools/fetch-kafka-python-suite.py pins it), unchanged, against one klog broker and one Apache Kafka 4.3 broker
started from the same properties: its admin client (ACLs, configs, groups, records, topics, partitions, log dirs,
quorum, reassignments), consumers (groups, offsets, seeks, timestamps, max bytes, heartbeats), producers (every
codec, idempotent, transactional with offsets) and its SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SSL
connections.

tools/fetch-kafka-python-suite.py downloads the source (pinned, checksummed) into .cache/kafka-python and writes the
two files of its ``test`` directory the sdist lacks; it runs under its own pytest with its own copy of ``kafka``.
tests/kafka_python_suite_plugin.py points each broker the suite's fixtures would start at a listener of the broker
under test; its properties are those of the suite's own server.properties (broker id 0, 4 partitions a topic, 1 s
minimum session timeout, an authorizer open where no ACL is found); it also has the suite's clients refresh metadata
every second, against a race of kafka-python's own (the plugin's docs).

On 2026-12-07 the 63 tests run here passed on both, klog in about 17 s, Apache Kafka in about 24 s; the suite
skips one itself on both (``test_kafka_consumer_offsets_for_time_old``, for brokers before 0.10.1). Left out: the
suite's SASL ``test_admin``, which lists topics with ``kafka-topics.sh`` from a Kafka distribution (there is none
here, broker or not: Kafka's jars come from Maven Central)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from klog.client.admin import AdminClient, UserScramCredentialUpsertion
from klog.testing.certs import CertificateAuthority
from klog.testing.kafka import free_port, one_broker
from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(600)

HERE = Path(__file__).resolve().parent
#: downloads (pinned, sha256-checked) and unpacks the suite; prints where
FETCH = HERE.parent / "tools" / "fetch-kafka-python-suite.py"
#: the Kafka version the suite's version checks read (KAFKA_VERSION)
KAFKA_VERSION = "4.3.1"
#: the suite's SASL user (its KafkaFixture.broker_user and broker_password)
USER, PASSWORD = "alice", "alice-secret"
#: the suite's own server.properties (its fixtures' template), in KRaft terms, and the SASL and SSL listeners
PROPERTIES = {
    "node.id": 0, "num.partitions": 4, "offsets.topic.num.partitions": 2, "transaction.state.log.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";',
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "ssl.keystore.type": "PEM",
}
#: left out, with why (pytest node ids under test/integration)
LEFT_OUT = {
    # lists topics with kafka-topics.sh from a Kafka distribution's bin/: none here, broker or not
    "test_sasl_integration.py::test_admin[PLAIN]": "needs Kafka's kafka-topics.sh",
    "test_sasl_integration.py::test_admin[SCRAM-SHA-256]": "needs Kafka's kafka-topics.sh",
    "test_sasl_integration.py::test_admin[SCRAM-SHA-512]": "needs Kafka's kafka-topics.sh",
}
#: skipped by the suite itself for a Kafka version (KAFKA_VERSION)
SKIPPED_FOR_VERSION = {"test_kafka_consumer_offsets_for_time_old"}
#: the bound of one test of the suite (its own is 300 s)
TEST_TIMEOUT_S = 60
RUN_TIMEOUT_S = 480


@pytest.fixture(scope="module")
def suite() -> Path:
    fetched = subprocess.run([sys.executable, str(FETCH)], capture_output=True, text=True, timeout=300)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    return Path(fetched.stdout.strip())


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory) -> Path:
    """The broker's key and certificate (``broker-keystore.pem``), and their CA as ``ca-cert`` (the suite's name)."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("kafka-python-pki"))
    keystore = Path(ca.issue("broker").keystore_file)
    shutil.copyfile(ca.ca_file, keystore.parent / "ca-cert")
    return keystore.parent


@contextlib.contextmanager
def broker_listeners(kind: str, root: Path, keystore: str) -> Iterator[dict[str, str]]:
    """A klog or an Apache Kafka broker with PLAINTEXT, SASL_PLAINTEXT and SSL listeners: their addresses."""
    sasl, tls = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    extra = [f"SASL_PLAINTEXT://{sasl}", f"SSL://{tls}"]
    props = {**PROPERTIES, "ssl.keystore.location": keystore}
    with contextlib.ExitStack() as stack:
        if kind == "klog":
            # advertised.listeners set, as one_broker sets it for Kafka (the suite reads its config source)
            listeners = ",".join([f"PLAINTEXT://127.0.0.1:{free_port()}", *extra])
            node = stack.enter_context(BrokerProcess(root / "data", {**props, "listeners": listeners,
                                                                      "advertised.listeners": listeners}))
            plaintext = node.bootstrap_servers
        else:
            plaintext = stack.enter_context(one_broker(kind, root, props, extra_listeners=extra))
        with AdminClient(plaintext) as admin:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):   # one request may alter a user once
                admin.alter_user_scram_credentials([UserScramCredentialUpsertion(USER, mechanism, PASSWORD)])
        yield {"KLOG_KP_PLAINTEXT": plaintext, "KLOG_KP_SASL_PLAINTEXT": sasl, "KLOG_KP_SSL": tls}


@pytest.fixture(params=["klog", "kafka"])
def listeners(request, tmp_path_factory, tls_dir: Path) -> Iterator[dict[str, str]]:
    with broker_listeners(request.param, tmp_path_factory.mktemp(f"kafka-python-{request.param}"),
                          str(tls_dir / "broker-keystore.pem")) as addresses:
        yield addresses


def test_kafka_pythons_own_integration_suite_passes(suite: Path, listeners: dict[str, str], tls_dir: Path,
                                                     tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    kafka_root = tmp_path / "no-kafka-distribution"   # the suite's fixtures want the directory to exist
    kafka_root.mkdir()
    env = {**os.environ, **listeners, "KLOG_KP_SSL_DIR": str(tls_dir), "KAFKA_VERSION": KAFKA_VERSION,
           "KAFKA_ROOT": str(kafka_root), "PYTHONPATH": os.pathsep.join([str(suite), str(HERE)])}
    deselect = [arg for node in sorted(LEFT_OUT) for arg in ("--deselect", f"test/integration/{node}")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "kafka_python_suite_plugin",
         "-o", "addopts=", "-o", "log_level=WARNING", f"--timeout={TEST_TIMEOUT_S}", "--timeout-method=signal",
         "-q", "-rfEs", f"--basetemp={tmp_path / 'suite'}", f"--junitxml={report}", "test/integration", *deselect],
        cwd=suite, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    out = run.stdout + run.stderr
    assert report.exists(), out[-6000:]
    outcomes: dict[tuple[str, str], str] = {}   # (module or class, test) -> verdict
    for case in ET.parse(report).iter("testcase"):
        verdict = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcomes[case.get("classname", ""), case.get("name", "")] = verdict
    failed = sorted(f"{where}::{name}" for (where, name), verdict in outcomes.items()
                    if verdict in ("failure", "error"))
    assert run.returncode == 0 and not failed, f"kafka-python's tests failed (exit {run.returncode}): {failed}\n" \
                                               f"{out[-8000:]}"
    skipped = {name for (_, name), verdict in outcomes.items() if verdict == "skipped"}
    assert skipped == SKIPPED_FOR_VERSION, sorted(skipped)
    # its SASL and SSL tests ran: each mechanism's login and the TLS handshake
    ran = {name for _, name in outcomes}
    assert {"test_produce_and_consume[PLAIN]", "test_client[SCRAM-SHA-512]", "test_ssl_handshake",
            "test_legacy_kafka_client_ssl"} <= ran, sorted(ran)
    print(f"{len(outcomes) - len(skipped)} of kafka-python's tests passed")
