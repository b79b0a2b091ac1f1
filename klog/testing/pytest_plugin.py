"""pytest plugin (entry point ``klog``): the ``klog_broker`` and ``klog_cluster`` fixtures.

``klog_broker`` is a running in-process :class:`klog.Broker` on a free 127.0.0.1 port with its data in a
temporary directory; use ``klog_broker.bootstrap_servers`` as the clients' bootstrap address. One broker
per test module keeps suites fast; topics created by one test stay visible to the next in that module.

``klog_cluster`` is a started :class:`klog.testing.cluster.KlogCluster`: 3 real ``klog-broker`` processes (a
``broker,controller`` quorum) on free ports, one cluster per test, with ``kill``/``pause``/``resume``/``restart``
of a node and waits for the controller, leaders and ISRs. ``@pytest.mark.klog_cluster(size=5, properties={...})``
changes its size or adds properties (Kafka's names); ``node_properties={1: {"broker.rack": "a"}, ...}`` adds some
to one node only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from klog.embedded import Broker
    from klog.testing.cluster import KlogCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "klog_cluster(size=3, properties=None, controllers=0): the klog_cluster "
                            "fixture's cluster (controllers=K: K controller-only nodes and size broker-only nodes)")


@pytest.fixture(scope="module")
def klog_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    from klog.embedded import Broker  # imported lazily: loading the plugin must stay cheap

    with Broker(data_dir=str(tmp_path_factory.mktemp("klog-broker"))) as broker:
        yield broker


@pytest.fixture(scope="session")
def apache_kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A single-node Apache Kafka 4.x (KRaft) started once per test session from the jars in
    ``.cache/kafka/libs`` (``bash tools/install-peers.sh``); yields its bootstrap string."""
    from klog.testing.kafka import apache_kafka  # imported lazily: loading the plugin must stay cheap

    with apache_kafka(tmp_path_factory.mktemp("apache-kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture
def klog_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KlogCluster]:
    """A started N-node klog cluster (3 unless ``@pytest.mark.klog_cluster(size=N)``), every node a live broker
    when the test starts; stopped after the test."""
    from klog.testing.cluster import KlogCluster  # imported lazily: loading the plugin must stay cheap

    marker = request.node.get_closest_marker("klog_cluster")
    options = dict(marker.kwargs) if marker is not None else {}
    with KlogCluster(tmp_path_factory.mktemp("klog-cluster"), options.pop("size", 3), **options) as cluster:
        cluster.wait_for_brokers()
        yield cluster
