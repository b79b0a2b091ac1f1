"""murmur2 and key partitioning agree with Kafka's Java client (and kafka-python)."""

import random

import pytest

from klog.partitioner import murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2 vectors.
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([ord("a"), ord("b"), ord("c")]), 479470107),
]


@pytest.mark.parametrize("key,expected", KAFKA_VECTORS)
def test_murmur2_matches_kafka_test_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"xfoobar")[1:]) == -790332482


def test_partition_for_key_matches_kafka_python_on_random_keys() -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    rng = random.Random(7)
    for _ in range(2000):
        key = rng.randbytes(rng.randrange(0, 40))
        n = rng.randrange(1, 200)
        # kafka-python returns the hash as an unsigned 32-bit value; Java (and klog) a signed int.
        assert murmur2(key) & 0xFFFFFFFF == kp_murmur2(key)
        assert partition_for_key(key, n) == (kp_murmur2(key) & 0x7FFFFFFF) % n


def test_partition_for_key_uses_the_positive_hash() -> None:
    # murmur2(b"21") is negative: Java masks the sign bit rather than taking abs().
    assert partition_for_key(b"21", 1000) == (-973932308 & 0x7FFFFFFF) % 1000


def test_partition_for_key_rejects_non_positive_partition_counts() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)


def test_str_keys_are_rejected() -> None:
    with pytest.raises(TypeError):
        murmur2("foobar")  # type: ignore[arg-type]
