"""pytest plugin (entry point ``klog``): the ``klog_broker`` fixture.

``klog_broker`` is a running in-process :class:`klog.Broker` on a free 127.0.0.1 port with its data in a
temporary directory; use ``klog_broker.bootstrap_servers`` as the clients' bootstrap address. One broker
per test module keeps suites fast; topics created by one test stay visible to the next in that module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from klog.embedded import Broker


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
