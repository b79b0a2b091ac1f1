"""Offsets JSON exactly like Spark's Kafka source: ``{"topicA":{"0":23,"1":-1}}``.

Topics sorted by name, partitions by number, partition keys as strings (offsets cross to the JVM as
JSON, so integer keys would come back as strings anyway). ``-2`` means earliest and ``-1`` latest
in option values; offsets in a stream's checkpoint are always concrete "next offset to read".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from klog.client import types as client_types

from klog.spark.errors import KlogSparkOptionError

__all__ = [
    "EARLIEST",
    "LATEST",
    "TopicPartition",
    "offsets_to_json_obj",
    "offsets_from_json_obj",
    "parse_offsets_json",
    "parse_timestamps_json",
    "format_offsets_json",
]

#: Kafka's ListOffsets sentinels, also Spark's offsets-JSON shorthand.
EARLIEST = -2
LATEST = -1


class TopicPartition(client_types.TopicPartition):
    """klog's client's partition, printed as Spark and Kafka print one: ``topic-partition``."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def offsets_to_json_obj(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Nested dict in Spark's order: topics sorted, partitions numerically, string partition keys."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def format_offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(offsets_to_json_obj(offsets), separators=(",", ":"))


def offsets_from_json_obj(obj: Any, *, what: str = "offsets") -> dict[TopicPartition, int]:
    """The inverse of :func:`offsets_to_json_obj`; accepts int or str partition keys."""
    if not isinstance(obj, dict):
        raise ValueError(f"Invalid {what}: expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {obj!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(topic, str) or not isinstance(parts, dict):
            raise ValueError(f"Invalid {what}: expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {obj!r}")
        for p, off in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise ValueError(f"Invalid {what}: partition {p!r} of topic {topic!r} is not an integer") from None
            if isinstance(off, bool) or not isinstance(off, int):
                raise ValueError(f"Invalid {what}: offset {off!r} of {topic}-{partition} is not an integer")
            if partition < 0:
                raise ValueError(f"Invalid {what}: partition {partition} of topic {topic!r} is negative")
            out[TopicPartition(topic, partition)] = off
    return out


def _load(raw: str, option: str, example: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError(f"Invalid value for option '{option}': expected e.g. {example}, got {raw}") from None


def parse_offsets_json(raw: str, *, option: str) -> dict[TopicPartition, int]:
    """Parse a ``startingOffsets``/``endingOffsets`` JSON value; -2 earliest, -1 latest, else >= 0."""
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    try:
        offsets = offsets_from_json_obj(_load(raw, option, example), what=f"value for option '{option}'")
    except ValueError as e:
        raise KlogSparkOptionError(str(e)) from None
    if not offsets:
        raise KlogSparkOptionError(f"Invalid value for option '{option}': no partitions in {raw}")
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise KlogSparkOptionError(
                f"Invalid value for option '{option}': offset {off} of {tp} (use -2 for earliest, -1 for latest)"
            )
    return offsets


def parse_timestamps_json(raw: str, *, option: str) -> dict[TopicPartition, int]:
    """Parse a ``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp`` JSON value (ms)."""
    example = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
    try:
        stamps = offsets_from_json_obj(_load(raw, option, example), what=f"value for option '{option}'")
    except ValueError as e:
        raise KlogSparkOptionError(str(e)) from None
    if not stamps:
        raise KlogSparkOptionError(f"Invalid value for option '{option}': no partitions in {raw}")
    for tp, ts in stamps.items():
        if ts < 0:
            raise KlogSparkOptionError(f"Invalid value for option '{option}': timestamp {ts} of {tp} is negative")
    return stamps
