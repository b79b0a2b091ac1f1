"""klog.protocol against independent implementations of the Kafka protocol.

- kafka-python 3.x ``kafka.protocol`` message classes (its own schema-driven codec): for every API and version
  both libraries have, bytes encoded by one are decoded by the other into the same values, and both encoders
  produce identical bytes for the same message.
- aiokafka's hand-written protocol classes (and kafka-python's legacy ``kafka.protocol.old`` ones) for the old,
  non-flexible versions that aiokafka and old librdkafka send.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random
import uuid
from typing import Any

import pytest

from klog.protocol import API_SCHEMAS, ApiKey, Struct, decode_body, decode_request, decode_request_header, \
    decode_response, encode_body, encode_request, encode_response
from klog.protocol.samples import expected_decoded, plain, sample_struct
from klog.protocol.schema import Field

kp = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402


def _kafka_python_classes() -> dict[str, Any]:
    out = {}
    for m in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in m.name or m.name.endswith("generate_stubs"):
            continue
        mod = importlib.import_module(m.name)
        for c in vars(mod).values():
            if inspect.isclass(c) and issubclass(c, ApiMessage) and c is not ApiMessage and getattr(c, "_json", None):
                out[c.name] = c
    return out


KP = _kafka_python_classes()


def _kp_valid(cls: Any) -> tuple[int, int]:
    lo, hi = (int(x) for x in str(cls._json["validVersions"]).split("-")) if "-" in str(
        cls._json["validVersions"]) else (int(cls._json["validVersions"]),) * 2
    return lo, hi


CASES = []
for _key, _s in sorted(API_SCHEMAS.items()):
    for _kind in ("Request", "Response"):
        _cls = KP.get(_s.name + _kind)
        if _cls is None:
            continue
        _lo, _hi = _kp_valid(_cls)
        for _v in range(max(_lo, _s.valid[0]), min(_hi, _s.valid[1]) + 1):
            CASES.append((_key, _kind, _v))


def test_kafka_python_covers_most_of_our_apis() -> None:
    # Guard against the cross-check silently shrinking (e.g. a kafka-python layout change).
    covered = {key for key, _, _ in CASES}
    assert len(covered) >= 25, sorted(covered)
    assert len(CASES) >= 300


def _to_kp(fields: tuple[Field, ...], version: int, value: Any, cls: Any) -> Any:
    """Build a kafka-python object of ``cls`` from one of our sample Structs."""
    kwargs = {}
    kp_fields = cls._struct.fields
    for i, f in enumerate(fields):
        if not f.present(version) or f.name not in value.__dict__:
            continue
        v = value.__dict__[f.name]
        name = _kp_name(cls, fields, i)
        kf = kp_fields[name]
        if _is_bitfield(kf):
            v = _int_to_bits(v)
        elif v is not None and f.kind == "struct":
            v = _to_kp(f.fields or (), version, v, kf.data_class)
        elif v is not None and f.kind == "array" and f.fields is not None:
            v = [_to_kp(f.fields, version, e, kf.data_class) for e in v]
        kwargs[name] = v
    return cls(version=version, **kwargs)


def _is_bitfield(kf: Any) -> bool:
    return "bit" in type(kf).__name__.lower() or getattr(kf, "type_str", None) == "bitfield"


def _int_to_bits(v: int) -> set[int] | None:
    """kafka-python represents int32 authorized-operations bitfields as sets of bit numbers (None = unset)."""
    if v == -(2**31):
        return None
    return {b for b in range(32) if (v & 0xFFFFFFFF) >> b & 1}


def _bits_to_int(bits: Any) -> int:
    if bits is None:
        return -(2**31)
    u = sum(1 << b for b in bits)
    return u - (1 << 32) if u >= 1 << 31 else u


def _drop_default_tags(fields: tuple[Field, ...], version: int, value: Any) -> None:
    """Remove tagged fields holding their default: Kafka (and we) omit them on the wire, while kafka-python writes
    every tagged field that was set explicitly."""
    for f in fields:
        if f.name not in value.__dict__:
            continue
        v = value.__dict__[f.name]
        if f.is_tagged(version) and plain(v) == plain(f.default_value()):
            del value.__dict__[f.name]
        elif isinstance(v, Struct):
            _drop_default_tags(f.fields or (), version, v)
        elif isinstance(v, list) and f.fields is not None:
            for e in v:
                _drop_default_tags(f.fields, version, e)


def _kp_name(cls: Any, fields: tuple[Field, ...], i: int) -> str:
    """kafka-python's name for our i-th field: the same snake_case name, except where its naming rule differs
    (e.g. it calls ClusterAuthorizedOperations ``authorized_operations``); then the field at the same position."""
    name = fields[i].name
    if name in cls._struct.fields:
        return name
    return str(cls._struct._fields[i].name)


def _from_kp(fields: tuple[Field, ...], version: int, obj: Any) -> dict:
    """Our plain-dict view of a kafka-python object, for the fields present at ``version``."""
    out = {}
    for i, f in enumerate(fields):
        if not f.present(version):
            continue
        name = _kp_name(type(obj), fields, i)
        v = getattr(obj, name)
        if _is_bitfield(type(obj)._struct.fields[name]):
            v = _bits_to_int(v)
        elif v is None and f.kind == "struct" and not f.is_nullable(version):
            v = _present_only(f.fields or (), version, plain(f.default_value()))  # kafka-python: absent tag = None
        elif v is not None and f.kind == "struct":
            v = _from_kp(f.fields or (), version, v)
        elif v is not None and f.kind == "array" and f.fields is not None:
            v = [_from_kp(f.fields, version, e) for e in v]
        elif isinstance(v, (bytes, bytearray, memoryview)):
            v = bytes(v)
        elif f.kind == "uuid":
            # kafka-python represents the zero UUID as None.
            v = uuid.UUID(int=0) if v is None else uuid.UUID(str(v))
        out[f.name] = v
    return out


def _present_only(fields: tuple[Field, ...], version: int, d: dict) -> dict:
    out = {}
    for f in fields:
        if not f.present(version):
            continue
        v = d[f.name]
        if v is not None and f.kind == "struct":
            v = _present_only(f.fields or (), version, v)
        elif v is not None and f.kind == "array" and f.fields is not None:
            v = [_present_only(f.fields, version, e) for e in v]
        out[f.name] = v
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{API_SCHEMAS[c[0]].name}{c[1]}-v{c[2]}")
def test_same_bytes_and_values_as_kafka_python(case: tuple[int, str, int]) -> None:
    key, kind, version = case
    s = API_SCHEMAS[key]
    msg = s.request if kind == "Request" else s.response
    cls = KP[s.name + kind]
    response = kind == "Response"
    rng = random.Random(f"kp-{key}-{kind}-{version}")
    for _ in range(5):
        body = sample_struct(msg.fields, version, s.is_flexible(version), rng)
        _drop_default_tags(msg.fields, version, body)
        if key == ApiKey.API_VERSIONS and response:
            body.error_code = 0  # kafka-python decodes error responses as v0 (the KIP-511 fallback)
        ours = encode_body(key, version, body, response=response)
        theirs = bytes(_to_kp(msg.fields, version, body, cls).encode(version=version))
        # kafka-python decodes our bytes into the same values...
        decoded_by_kp = _from_kp(msg.fields, version, cls.decode(ours, version=version))
        expected = _present_only(msg.fields, version, expected_decoded(msg.fields, version, body))
        assert decoded_by_kp == expected
        # ...we decode theirs into the same values...
        decoded, end = decode_body(key, version, theirs, response=response)
        assert end == len(theirs)
        assert plain(decoded) == expected_decoded(msg.fields, version, body)
        # ...and both encoders write the same bytes.
        assert ours == theirs


def test_request_frames_with_headers_match_kafka_python() -> None:
    from kafka.protocol.metadata import MetadataRequest

    for version in (0, 4, 8, 9, 12):
        topics = [MetadataRequest.MetadataRequestTopic(version=version, name="orders")]
        req = MetadataRequest(version=version, topics=topics)
        req.with_header(correlation_id=99, client_id="kp-client")
        theirs = bytes(req.encode(version=version, header=True, framed=True))
        ours = encode_request(ApiKey.METADATA, version, 99, "kp-client", {"topics": [{"name": "orders"}]})
        assert ours == theirs, version
        header, off = decode_request_header(memoryview(theirs)[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            3, version, 99, "kp-client")
        assert decode_request(header, memoryview(theirs)[4:], off).topics[0].name == "orders"


def test_response_frames_with_headers_match_kafka_python() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

    for version in (1, 9, 12):
        resp = MetadataResponse(version=version, brokers=[MetadataResponse.MetadataResponseBroker(
            version=version, node_id=1, host="localhost", port=9092, rack=None)], topics=[])
        resp.with_header(correlation_id=7)
        theirs = bytes(resp.encode(header=True, framed=True))
        ours = b"".join(encode_response(ApiKey.METADATA, version, 7, {"brokers": [
            {"node_id": 1, "host": "localhost", "port": 9092, "rack": None}], "topics": [], "controller_id": 0,
            "cluster_id": None}))
        # kafka-python's defaults for controller_id/cluster_id may differ from the schema: compare decoded values.
        cid, decoded = decode_response(ApiKey.METADATA, version, theirs[4:])
        assert cid == 7 and decoded.brokers[0].host == "localhost" and decoded.brokers[0].port == 9092
        assert MetadataResponse.decode(ours, version=version, header=True, framed=True).brokers[0].node_id == 1
    # ApiVersions responses: header v0 even for flexible versions, in both libraries.
    for version in (0, 3, 4):
        resp = ApiVersionsResponse(version=version, error_code=0, api_keys=[
            ApiVersionsResponse.ApiVersion(version=version, api_key=0, min_version=3, max_version=13)])
        resp.with_header(correlation_id=5)
        theirs = bytes(resp.encode(header=True, framed=True))
        ours = b"".join(encode_response(ApiKey.API_VERSIONS, version, 5, {
            "error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 13}]}))
        assert ours == theirs, version


# --------------------------------------------------------------------------------------------------------------
# aiokafka and kafka-python's legacy classes: hand-written positional schemas for the old, non-flexible versions

_NAME_ALIASES = {"Offset": "ListOffsets", "ApiVersion": "ApiVersions", "SaslHandShake": "SaslHandshake"}


def _legacy_classes(package: str) -> list[tuple[str, int, str, int, Any]]:
    """(library, api_key, kind, version, class) for every versioned legacy class of a known API."""
    by_name = {s.name: key for key, s in API_SCHEMAS.items()}
    mod_pkg = importlib.import_module(package)
    out = []
    seen = set()
    for m in pkgutil.iter_modules(mod_pkg.__path__, package + "."):
        mod = importlib.import_module(m.name)
        for name, c in vars(mod).items():
            if not inspect.isclass(c) or "_v" not in name or not hasattr(c, "SCHEMA"):
                continue
            base, _, ver = name.rpartition("_v")
            if not ver.isdigit():
                continue
            for kind in ("Request", "Response"):
                if base.endswith(kind):
                    api = base[: -len(kind)]
                    api = _NAME_ALIASES.get(api, api)
                    key = by_name.get(api)
                    if key is not None and (key, kind, int(ver)) not in seen:
                        s = API_SCHEMAS[key]
                        if s.valid[0] <= int(ver) <= s.valid[1] and not s.is_flexible(int(ver)):
                            seen.add((key, kind, int(ver)))
                            out.append((package.split(".")[0], key, kind, int(ver), c))
    return sorted(out, key=lambda t: (t[1], t[2], t[3]))


def _positional(fields: tuple[Field, ...], version: int, value: Any, schema: Any) -> tuple:
    """Our value as the positional tuples of a legacy ``Schema``, guided by its types: a struct of one field is
    the bare value when the legacy type is not a struct (e.g. Metadata v0 ``topics`` = array of strings), and
    int32 bitfields become sets."""
    out = []
    d = value.__dict__ if isinstance(value, Struct) else value
    present = [f for f in fields if f.present(version)]
    i = 0
    for t in schema.fields:
        f = present[i]
        if _is_schema(t) and f.kind != "struct":
            # The legacy class groups consecutive fields into a nested Schema (same bytes on the wire), e.g.
            # CreatePartitions v0-1 ``new_partitions = (count, assignment)``.
            group = present[i:i + len(t.fields)]
            out.append(tuple(_legacy_value(g, version, d.get(g.name, g.default_value()), gt)
                             for g, gt in zip(group, t.fields)))
            i += len(group)
            continue
        out.append(_legacy_value(f, version, d.get(f.name, f.default_value()), t))
        i += 1
    assert i == len(present), "legacy schema and ours have different fields"
    return tuple(out)


def _is_schema(t: Any) -> bool:
    return type(t).__name__ == "Schema"


def _legacy_value(f: Field, version: int, v: Any, t: Any) -> Any:
    tname = type(t).__name__ if not isinstance(t, type) else t.__name__
    if tname == "BitField":
        return _int_to_bits(v)
    if v is None:
        return None
    if f.kind == "struct":
        return _positional(f.fields or (), version, v, t)
    if f.kind == "array" and f.fields is not None:
        elem_t = t.array_of
        if _is_schema(elem_t):
            return [_positional(f.fields, version, e, elem_t) for e in v]
        (only,) = [c for c in f.fields if c.present(version)]
        return [_legacy_value(only, version, (e.__dict__ if isinstance(e, Struct) else e)[only.name], elem_t)
                for e in v]
    if isinstance(v, (memoryview, bytearray)):
        return bytes(v)
    return v


# Schemas where the legacy hand-written classes disagree with Kafka's message definitions (their bugs, checked
# below so we notice when they are fixed): aiokafka declares ListOffsets v4/v5 current_leader_epoch as int64,
# Kafka's ListOffsetsRequest.json says int32.
KNOWN_LEGACY_BUGS = {("aiokafka", ApiKey.LIST_OFFSETS, "Request", 4), ("aiokafka", ApiKey.LIST_OFFSETS, "Request", 5)}


LEGACY_ALL = []
for _pkg in ("aiokafka.protocol", "kafka.protocol.old"):
    LEGACY_ALL.extend(_legacy_classes(_pkg))
LEGACY = [c for c in LEGACY_ALL if c[:4] not in KNOWN_LEGACY_BUGS]


def test_known_legacy_bugs_are_still_there() -> None:
    for lib, key, kind, version, cls in LEGACY_ALL:
        if (lib, key, kind, version) in KNOWN_LEGACY_BUGS:
            names = list(cls.SCHEMA.fields[2].array_of.fields[1].array_of.names)
            epoch_type = cls.SCHEMA.fields[2].array_of.fields[1].array_of.fields[names.index("current_leader_epoch")]
            assert epoch_type.__name__ == "Int64", "fixed upstream: drop it from KNOWN_LEGACY_BUGS"


def test_legacy_implementations_cover_the_old_versions_clients_send() -> None:
    have = {(lib, key, kind, v) for lib, key, kind, v, _ in LEGACY}
    for key, v in [(ApiKey.PRODUCE, 3), (ApiKey.FETCH, 4), (ApiKey.METADATA, 0), (ApiKey.FIND_COORDINATOR, 0),
                   (ApiKey.LIST_OFFSETS, 1), (ApiKey.JOIN_GROUP, 0), (ApiKey.API_VERSIONS, 0)]:
        assert ("aiokafka", key, "Request", v) in have, (key, v)
    assert len(LEGACY) >= 150


@pytest.mark.parametrize("case", LEGACY, ids=lambda c: f"{c[0]}-{API_SCHEMAS[c[1]].name}{c[2]}-v{c[3]}")
def test_old_versions_match_legacy_hand_written_classes(case: tuple[str, int, str, int, Any]) -> None:
    from io import BytesIO

    lib, key, kind, version, cls = case
    s = API_SCHEMAS[key]
    msg = s.request if kind == "Request" else s.response
    response = kind == "Response"
    rng = random.Random(f"legacy-{lib}-{key}-{kind}-{version}")
    for _ in range(5):
        body = sample_struct(msg.fields, version, False, rng)
        values = _positional(msg.fields, version, body, cls.SCHEMA)
        theirs = bytes(cls.SCHEMA.encode(values))
        ours = encode_body(key, version, body, response=response)
        assert ours == theirs
        decoded, end = decode_body(key, version, theirs, response=response)
        assert end == len(theirs)
        assert plain(decoded) == expected_decoded(msg.fields, version, body)
        assert _positional(msg.fields, version, expected_decoded(msg.fields, version, body), cls.SCHEMA) == \
            _lists(cls.SCHEMA.decode(BytesIO(ours)))


def _lists(v: Any) -> Any:
    """Legacy decoders return nested tuples for structs and lists for arrays; normalise bytes-likes."""
    if isinstance(v, tuple):
        return tuple(_lists(x) for x in v)
    if isinstance(v, list):
        return [_lists(x) for x in v]
    if isinstance(v, (memoryview, bytearray)):
        return bytes(v)
    return v
