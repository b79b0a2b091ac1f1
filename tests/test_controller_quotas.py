"""AlterClientQuotas decided on a metadata image as ClientQuotaRecords (Kafka's ClientQuotaControlManager's
validation and error codes), without sockets."""

from __future__ import annotations

from types import SimpleNamespace as NS

import asyncio

from klog.controller.apis import resolvable_host_names
from klog.controller.quotas import alter_client_quotas, ip_host_names
from klog.metadata.delta import replay
from klog.metadata.image import MetadataImage
from klog.protocol.errors import ErrorCode


def entry(entity, **ops):
    return NS(entity=[NS(entity_type=t, entity_name=n) for t, n in entity],
              ops=[NS(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])


def apply(image, *entries, validate_only=False, resolvable_hosts=frozenset()):
    result = alter_client_quotas(list(entries), image, validate_only=validate_only,
                                 resolvable_hosts=resolvable_hosts)
    image, _ = replay(image, list(result.records))
    return image, [(r["error_code"], r["error_message"]) for r in result.response], result.records


def test_set_change_and_remove_quotas_per_entity():
    image, answers, _ = apply(MetadataImage(),
                              entry([("user", "alice")], producer_byte_rate=1024, consumer_byte_rate=2048),
                              entry([("user", None), ("client-id", None)], request_percentage=12.5),
                              entry([("client-id", "app")], producer_byte_rate=10))
    assert [a[0] for a in answers] == [0, 0, 0]
    assert image.client_quotas[(("user", "alice"),)] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert image.client_quotas[(("client-id", None), ("user", None))] == {"request_percentage": 12.5}
    # an unchanged value writes nothing; a removal of a missing key writes nothing
    _, answers, records = apply(image, entry([("user", "alice")], producer_byte_rate=1024, request_percentage=None))
    assert answers == [(0, None)] and records == []
    image, _, records = apply(image, entry([("user", "alice")], producer_byte_rate=None, consumer_byte_rate=4096))
    assert len(records) == 2
    assert image.client_quotas[(("user", "alice"),)] == {"consumer_byte_rate": 4096.0}


def test_validate_only_answers_without_records():
    image, answers, records = apply(MetadataImage(), entry([("user", "bob")], producer_byte_rate=1), validate_only=True)
    assert answers == [(0, None)] and records == [] and not image.client_quotas


def test_invalid_entries_change_nothing_for_their_entity_only():
    bad = {
        "unknown key": entry([("user", "a")], connection_creation_rate=5),
        "zero": entry([("user", "a2")], producer_byte_rate=0),   # (an entity named twice is refused whole)
        "negative": entry([("client-id", "c")], request_percentage=-1),
        "fraction of a long": entry([("user", "a3")], consumer_byte_rate=1.5),
        "too large for a long": entry([("user", "a4")], consumer_byte_rate=2.0 ** 64),
        "ip with user": entry([("ip", "1.2.3.4"), ("user", "a5")], connection_creation_rate=5),
        "bad ip": entry([("ip", "not-an-ip")], connection_creation_rate=5),
        "empty entity": entry([], producer_byte_rate=5),
        "empty name": entry([("user", "")], producer_byte_rate=5),
    }
    image, answers, _ = apply(MetadataImage(), *bad.values(), entry([("user", "ok")], producer_byte_rate=5))
    for (name, _), (code, message) in zip(bad.items(), answers):
        assert code == ErrorCode.INVALID_REQUEST and message, name
    assert answers[-1] == (0, None)
    assert list(image.client_quotas) == [(("user", "ok"),)]
    assert answers[0][1] == "Invalid configuration key connection_creation_rate"
    assert answers[3][1] == "consumer_byte_rate cannot be a fractional value."
    _, answers, _ = apply(MetadataImage(), entry([("group", "g")], producer_byte_rate=5))
    assert answers == [(ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group")]


def test_ip_quotas():
    image, answers, _ = apply(MetadataImage(), entry([("ip", "10.0.0.1")], connection_creation_rate=5),
                              entry([("ip", None)], connection_creation_rate=50))
    assert answers == [(0, None), (0, None)]
    assert image.client_quotas[(("ip", None),)] == {"connection_creation_rate": 50.0}


def test_ip_entity_host_names_are_decided_from_the_names_resolved_before_not_looked_up():
    entries = [entry([("ip", "broker-host.example")], connection_creation_rate=5),
               entry([("ip", "10.0.0.2")], connection_creation_rate=5), entry([("ip", None)], connection_creation_rate=5),
               entry([("ip", "::1")], connection_creation_rate=5), entry([("user", "u")], producer_byte_rate=5)]
    assert ip_host_names(entries) == {"broker-host.example"}   # addresses and defaults need no lookup
    _, answers, _ = apply(MetadataImage(), *entries[:2])
    assert answers == [(ErrorCode.INVALID_REQUEST, "broker-host.example is not a valid IP or resolvable host."),
                       (0, None)]
    image, answers, _ = apply(MetadataImage(), *entries[:2], resolvable_hosts={"broker-host.example"})
    assert answers == [(0, None), (0, None)]
    assert image.client_quotas[(("ip", "broker-host.example"),)] == {"connection_creation_rate": 5.0}


def test_host_names_resolve_off_the_loop_and_unresolvable_ones_are_left_out():
    names = {"localhost", "no-such-host.invalid", "x" * 300}   # an over-long label fails to encode, not a crash
    assert asyncio.run(resolvable_host_names(names)) == {"localhost"}
    assert asyncio.run(resolvable_host_names(set())) == frozenset()
