"""A TLS listener seen from outside, for tests of klog and Apache Kafka alike: a client connection (with a client
certificate for mTLS), the certificate the listener serves, an ApiVersions round trip over it, a dynamic keystore
change through IncrementalAlterConfigs, and a record produced and consumed back with confluent-kafka."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from klog.testing.certs import Issued
from klog.testing.wire import read_frame

__all__ = ["admits", "alter_broker_config", "api_versions_v0", "connect", "produce_and_consume",
           "served_certificate", "wait_for_served_serial"]

Address = tuple[str, int]


def connect(address: Address, ca_file: str, client: Issued | None = None, timeout_s: float = 10) -> ssl.SSLSocket:
    """A TLS connection to ``address`` that verifies the listener's certificate (host name included) against
    ``ca_file``, presenting ``client``'s certificate when given."""
    context = ssl.create_default_context(cafile=ca_file)
    if client is not None:
        context.load_cert_chain(client.cert_file, client.key_file)
    return context.wrap_socket(socket.create_connection(address, timeout=timeout_s), server_hostname=address[0])


def served_certificate(address: Address, ca_file: str) -> x509.Certificate:
    """The certificate a new connection to ``address`` is served."""
    with connect(address, ca_file) as tls:
        der = tls.getpeercert(binary_form=True)
        assert der is not None, f"{address} served no certificate"
        return x509.load_der_x509_certificate(der)


def wait_for_served_serial(address: Address, ca_file: str, serial: int, timeout_s: float = 30) -> None:
    """Until new connections to ``address`` are served the certificate of ``serial`` (a dynamic change applied)."""
    deadline = time.monotonic() + timeout_s
    seen = served_certificate(address, ca_file).serial_number
    while seen != serial and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = served_certificate(address, ca_file).serial_number
    assert seen == serial, f"the listener still serves certificate {seen:x}, not {serial:x}"


def api_versions_v0(sock: socket.socket, correlation_id: int) -> int:
    """One ApiVersions v0 round trip on ``sock``: its error code."""
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    sock.sendall(struct.pack(">i", len(body)) + body)
    answer = read_frame(sock)
    assert struct.unpack(">i", answer[:4])[0] == correlation_id
    return int(struct.unpack(">h", answer[4:6])[0])


def admits(address: Address, ca_file: str, client: Issued) -> bool:
    """Whether a new connection presenting ``client``'s certificate is answered (ApiVersions) by the mTLS listener
    at ``address``: False when the handshake or the first read fails."""
    try:
        with connect(address, ca_file, client) as tls:
            return api_versions_v0(tls, 3) == 0
    except (ssl.SSLError, ConnectionError, AssertionError, OSError):
        return False


def alter_broker_config(bootstrap: str, key: str, value: str, broker: str = "1") -> tuple[int, str]:
    """IncrementalAlterConfigs SET of ``key`` on broker ``broker``'s resource with confluent-kafka: (error code,
    message); (0, "") when it was taken."""
    from confluent_kafka import admin as kafka_admin

    admin = kafka_admin.AdminClient({"bootstrap.servers": bootstrap})
    resource = kafka_admin.ConfigResource(kafka_admin.ConfigResource.Type.BROKER, broker, incremental_configs=[
        kafka_admin.ConfigEntry(key, value, incremental_operation=kafka_admin.AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
    except Exception as exc:  # noqa: BLE001 - a KafkaException carrying the KafkaError
        error = exc.args[0]
        return int(error.code()), str(error.str())
    return 0, ""


def produce_and_consume(conf: Mapping[str, Any], topic: str, value: bytes | None = None,
                        timeout_s: float = 30) -> None:
    """confluent-kafka produces ``value`` (a fresh one by default) to ``topic`` with the client settings ``conf``
    and a consumer of a new group reads it back from the beginning with the same settings."""
    from confluent_kafka import Consumer, Producer

    value = value if value is not None else f"probe-{uuid.uuid4()}".encode()
    producer = Producer(dict(conf))
    producer.produce(topic, value)
    assert producer.flush(timeout_s) == 0, "the record was not delivered"
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + timeout_s
    try:
        while value not in seen and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
    finally:
        consumer.close()
    assert value in seen, f"{value!r} was not read back from {topic}"
