"""A pytest plugin for kafka-python's own integration tests, loaded with ``-p`` by tests/test_kafka_python_suite.py
into the pytest that runs them (never imported by klog's tests). Every broker the suite's fixtures would start
(``KafkaFixture.instance``: a Kafka distribution's scripts under KAFKA_ROOT, which this machine has not) is instead the
one broker under test, reached through the listener of the transport the fixture asks for: PLAINTEXT, SASL_PLAINTEXT
(PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 as the suite's user alice) or SSL. The suite's own external mode
(``KAFKA_URI``) does this for PLAINTEXT only and skips its SASL tests; its SSL tests start a broker of their own.

Its clients refresh metadata every second (``metadata_max_age_ms``, 5 minutes unless given): kafka-python 3.0.12
loses a metadata update asked for while a Metadata request for its older topics is in flight (``update_metadata``
clears ``_need_update``), so a consumer subscribing as its bootstrap Metadata is answered learns its topic only at
the next periodic refresh; seen on klog in 2 of about 20 runs (``test_kafka_consumer`` waiting out its 30 s,
``test_kafka_consumer_unsupported_encoding`` its 2 s poll), whatever the broker answers.

Environment: ``KLOG_KP_PLAINTEXT``, ``KLOG_KP_SASL_PLAINTEXT``, ``KLOG_KP_SSL`` (each ``host:port``) and
``KLOG_KP_SSL_DIR`` (a directory holding the broker certificate's CA as ``ca-cert``, the name the suite reads)."""

from __future__ import annotations

import os
from typing import Any

#: how often the suite's clients refresh metadata: an update kafka-python lost is asked again within it
METADATA_MAX_AGE_MS = 1000


def pytest_configure(config: Any) -> None:
    from test.integration import fixtures  # the suite's package: its source directory is on PYTHONPATH

    start_fixture = fixtures.KafkaFixture.instance.__func__

    def broker_under_test(cls: Any, broker_id: int, *, transport: str = "PLAINTEXT", sasl_mechanism: str | None = None,
                          partitions: int = 4, replicas: int = 1, tmp_dir: Any = None, **_started_only: Any) -> Any:
        host, port = os.environ[f"KLOG_KP_{transport.upper()}"].rsplit(":", 1)
        fixture = start_fixture(cls, broker_id, host=host, port=int(port), external=True, transport=transport,
                                sasl_mechanism=sasl_mechanism, partitions=partitions, replicas=replicas,
                                tmp_dir=tmp_dir)
        if fixture.ssl_enabled:
            fixture.ssl_dir = os.environ["KLOG_KP_SSL_DIR"]
        return fixture

    fixtures.KafkaFixture.instance = classmethod(broker_under_test)

    client_params = fixtures.KafkaFixture._enrich_client_params

    def with_metadata_refresh(self: Any, params: dict[str, Any], **defaults: Any) -> dict[str, Any]:
        return client_params(self, params, **{"metadata_max_age_ms": METADATA_MAX_AGE_MS, **defaults})

    fixtures.KafkaFixture._enrich_client_params = with_metadata_refresh
