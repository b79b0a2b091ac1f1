"""Key-based partitioning, identical to the Java producer's default partitioner.

Java, kafka-python and aiokafka send a keyed record to
``(murmur2(key) & 0x7fffffff) % num_partitions``; using the same function keeps klog's
producers consistent with theirs. (librdkafka's default ``consistent_random`` differs; set
``partitioner=murmur2_random`` there to agree.)
"""

from __future__ import annotations

from typing import Union

from klog._native import _core

__all__ = ["murmur2", "partition_for_key"]

#: Anything with the C-contiguous buffer protocol; read in place.
BytesLike = Union[bytes, bytearray, memoryview]


def _check(key: BytesLike) -> BytesLike:
    if isinstance(key, str):
        raise TypeError("key must be bytes, not str (encode it first)")
    return key


def murmur2(key: BytesLike) -> int:
    """Kafka's murmur2 hash of ``key`` as Java's ``Utils.murmur2`` returns it (a signed 32-bit int)."""
    return _core.murmur2(_check(key))


def partition_for_key(key: BytesLike, num_partitions: int) -> int:
    """Partition of a keyed record: ``(murmur2(key) & 0x7fffffff) % num_partitions``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
