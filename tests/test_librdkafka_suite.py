"""librdkafka's own integration tests (its ``tests/0xxx`` programs, whole and unchanged, built from the source release
by tools/install-librdkafka-tests.sh), the ones that need a broker (not its mock-cluster tests), against one klog broker
and one Apache Kafka 4.3 broker started from the same properties: producers (acks, batching, compression, headers,
idempotence, retries over connections its socket emulator cuts), consumers (offsets, seeks, pauses, lag, regex
subscriptions), classic consumer groups (rebalances eager and cooperative, static members, max.poll.interval),
transactions (read_committed consumers, aborted batches), the admin API (topics, partitions, configs, ACLs, groups,
records' deletion) and topics made or recreated under a running client.

Each test number runs in its own runner process with a seed of its own (TEST_SEED: its topic names and random
choices repeat from run to run), in the runner's full mode (its quick mode ``-Q`` leaves most sub-tests out).
Like librdkafka's own CI cluster (trivup), the broker has an authorizer that lets everyone do what no ACL names,
so the ACL tests can deny a topic; the tests of the ``noautocreate`` scenario run against a broker that creates no
topic on a Metadata request, those whose topics take three replicas (transactions, fetch from a follower) against
three nodes in three racks. ``CI_TESTS`` runs on klog in CI; every one of them runs on both in ``make test-long``
(marker long) and ``make librdkafka-suite``. docs/compatibility.md lists the tests left out and why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from librdkafka_support import Verdict, build_test_runner, run_test_number

from klog.testing.cluster import cluster_of
from klog.testing.kafka import one_broker

pytestmark = [pytest.mark.java, pytest.mark.timeout(900)]

#: a broker as librdkafka's own test clusters (trivup) have it: 4 partitions to a topic made by a Metadata request,
#: and Kafka's default 3 s group.initial.rebalance.delay.ms (one_broker's 0 completes a new group's first
#: rebalance with whoever joined first: 0102's, 0113's and 0118's group tests count on members that subscribe
#: together sharing the first generation, and lose a race with 0, on Kafka as on klog; docs/compatibility.md)
PARTITIONS: dict[str, object] = {
    "num.partitions": 4, "offsets.topic.num.partitions": 4, "transaction.state.log.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 3000}
#: the default scenario's broker: with an authorizer that lets everyone do what no ACL names (not on the 3 nodes:
#: Kafka's quorum of nodes that are not super users cannot form before the authorizer has loaded its ACLs)
CONFIG: dict[str, object] = {
    **PARTITIONS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true"}
#: the ``noautocreate`` scenario's broker
NO_AUTO_CREATE = {**CONFIG, "auto.create.topics.enable": "false"}
#: the default scenario's test numbers that need a broker (the runner's ``-L`` leaves out its mock-cluster tests) and
#: pass on one Apache Kafka 4.3 broker; docs/compatibility.md names those left out
ALL_TESTS = (
    "0001 0002 0003 0005 0007 0008 0011 0012 0013 0014 0015 0016 0017 0018 0019 0020 0021 0022 0026 0029 0030 0031 "
    "0033 0034 0035 0036 0038 0039 0040 0041 0042 0044 0045 0048 0049 0050 0051 0052 0053 0054 0055 0056 0057 0059 "
    "0060 0061 0063 0064 0065 0067 0068 0069 0070 0073 0075 0076 0081 0082 0083 0084 0085 0086 0088 0089 0090 0091 "
    "0093 0094 0099 0102 0109 0110 0112 0114 0115 0118 0119 0122 0123 0125 0127 0130 0132 0137 0140").split()
#: tests whose topics take three replicas (transactions, fetch from a follower in another rack): a 3-node cluster
CLUSTER_TESTS = ("0098", "0101", "0103")
#: the noautocreate scenario's tests, by number (the runner skips the number's other tests in that scenario)
NO_AUTO_CREATE_TESTS = {"0045": ("0045_subscribe_update_non_exist_and_partchange", "0045_subscribe_update_topic_remove")}
#: tests Apache Kafka 4 refuses at the start, and what it says: 0129 makes its topic with segment.bytes=20000, below
#: Kafka 4.0's 1 MiB minimum, which klog does not enforce (docs/compatibility.md)
REFUSED_BY_KAFKA_4 = {"0129": "Value must be at least 1048576"}
#: CI's short run on klog: producing and consuming, compression, idempotence, offset commits, groups (rebalances,
#: listing, static members, a commit in a revoke callback), aborted transactions under read_committed, ACLs denying
#: a producer
CI_TESTS = ("0012", "0017", "0019", "0030", "0056", "0090", "0099", "0102", "0115", "0118", "0129")
#: a seed per test number: topic names repeat from run to run but never between two numbers on one broker
SEED_BASE = 1000


@pytest.fixture(scope="module")
def test_runner() -> Path:
    return build_test_runner()


def broker_of(kind: str, root: Path, config: dict[str, object]) -> Iterator[str]:
    with one_broker(kind, root, config) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module", params=["klog", "kafka"])
def broker(request, tmp_path_factory) -> Iterator[str]:
    yield from broker_of(request.param, tmp_path_factory.mktemp(f"rdk-{request.param}"), CONFIG)


@pytest.fixture(scope="module", params=["klog", "kafka"])
def no_auto_create_broker(request, tmp_path_factory) -> Iterator[str]:
    yield from broker_of(request.param, tmp_path_factory.mktemp(f"rdk-noauto-{request.param}"), NO_AUTO_CREATE)


@pytest.fixture(scope="module", params=["klog", "kafka"])
def three_nodes(request, tmp_path_factory) -> Iterator[str]:
    """Three nodes in three racks, fetches from the nearest replica (RackAwareReplicaSelector), as 0101 expects."""
    properties = {**PARTITIONS, "default.replication.factor": 3,
                  "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
    with cluster_of(request.param, tmp_path_factory.mktemp(f"rdk-3-{request.param}"), 3, properties=properties,
                    node_properties={node: {"broker.rack": f"rack{node}"} for node in (1, 2, 3)}) as cluster:
        yield cluster.bootstrap_servers


def check_number(number: str, bootstrap: str, workdir: Path, *args: str,
                 only: tuple[str, ...] = ()) -> dict[str, Verdict]:
    """Run the tests ``number`` (``only`` those named): each must pass (a test that skips itself, or gives no verdict,
    fails here)."""
    verdicts, output = run_test_number(number, bootstrap, workdir, env={"TEST_SEED": str(SEED_BASE + int(number))},
                                       args=args)
    if only:
        verdicts = {name: verdicts.get(name, Verdict("no verdict", 0, "")) for name in only}
    assert verdicts, f"librdkafka's tests {number} gave no verdict:\n{output[-6000:]}"
    bad = {name: v for name, v in verdicts.items() if v.state != "PASSED"}
    assert not bad, f"librdkafka's tests {number}: {bad}\n{output[-8000:]}"
    return verdicts


def check_kafka_refuses(number: str, bootstrap: str, workdir: Path) -> None:
    verdicts, output = run_test_number(number, bootstrap, workdir, env={"TEST_SEED": str(SEED_BASE + int(number))})
    assert all(v.state != "PASSED" for v in verdicts.values()) and REFUSED_BY_KAFKA_4[number] in output, output[-6000:]


@pytest.mark.parametrize("number", CI_TESTS)
def test_librdkafkas_own_broker_tests_pass(request, test_runner: Path, broker: str, number: str,
                                           tmp_path: Path) -> None:
    if number in REFUSED_BY_KAFKA_4 and request.node.callspec.params["broker"] == "kafka":
        check_kafka_refuses(number, broker, tmp_path)
    else:
        check_number(number, broker, tmp_path)


@pytest.mark.long
@pytest.mark.parametrize("number", sorted(set(ALL_TESTS) - set(CI_TESTS)))
def test_librdkafkas_whole_broker_suite_passes(test_runner: Path, broker: str, number: str, tmp_path: Path) -> None:
    check_number(number, broker, tmp_path)


@pytest.mark.long
@pytest.mark.parametrize("number", sorted(NO_AUTO_CREATE_TESTS))
def test_librdkafkas_tests_of_a_broker_that_creates_no_topic_on_metadata_pass(
        test_runner: Path, no_auto_create_broker: str, number: str, tmp_path: Path) -> None:
    check_number(number, no_auto_create_broker, tmp_path, "-s", "noautocreate", only=NO_AUTO_CREATE_TESTS[number])


@pytest.mark.long
@pytest.mark.parametrize("number", CLUSTER_TESTS)
def test_librdkafkas_replicated_transaction_and_follower_fetch_tests_pass_on_three_nodes(
        test_runner: Path, three_nodes: str, number: str, tmp_path: Path) -> None:
    check_number(number, three_nodes, tmp_path)
