"""Sans-IO pieces of the klog client's transactions: the transactional flag written into a produced batch, and the
read_committed filter of the DirectClient (Kafka's Fetcher rules) over hand-built batches."""

from __future__ import annotations

from klog._native import _core
from klog.client.direct import drop_aborted
from klog.client.producer import _mark_transactional

encode_batch = _core.encode_batch


def _marker(offset: int, pid: int, commit: bool) -> bytes:
    # Kafka's control record: key = version 0, type (0 abort, 1 commit); value = version 0, coordinator epoch 0.
    key = b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
    return encode_batch([{"key": key, "value": b"\x00\x00\x00\x00\x00\x00", "timestamp": 1}], base_offset=offset,
                        producer_id=pid, producer_epoch=0, is_control=True, is_transactional=True)


def _data(offset: int, pid: int, *values: bytes, txn: bool = True) -> bytes:
    return encode_batch([{"value": v, "timestamp": 1} for v in values], base_offset=offset, producer_id=pid,
                        producer_epoch=0, base_sequence=0, is_transactional=txn)


def _values(data: bytes | memoryview) -> list[bytes]:
    return [r.value for b in _core.decode_batches(data) if not b.is_control for r in b.records]


def test_a_batch_marked_transactional_keeps_a_valid_crc_and_its_records() -> None:
    plain = encode_batch([{"value": b"a", "timestamp": 1}, {"value": b"b", "timestamp": 2}], producer_id=7,
                         producer_epoch=1, base_sequence=0)
    marked = _mark_transactional(memoryview(plain))
    (b,) = _core.decode_batches(marked)          # verifies the CRC
    assert b.is_transactional and not b.is_control
    assert [r.value for r in b.records] == [b"a", b"b"] and b.producer_id == 7
    assert bytes(marked) == encode_batch([{"value": b"a", "timestamp": 1}, {"value": b"b", "timestamp": 2}],
                                         producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True)


def test_drop_aborted_follows_kafkas_fetcher() -> None:
    log = b"".join([
        _data(0, 1, b"p1-aborted-0", b"p1-aborted-1"),   # pid 1's aborted transaction starts at 0
        _data(2, 2, b"p2-committed"),                   # another producer's records stay
        _data(3, 9, b"plain", txn=False),               # not transactional: always kept
        _marker(4, 1, commit=False),                    # ABORT ends pid 1's aborted transaction
        _data(5, 1, b"p1-later"),                       # pid 1's next transaction (not aborted)
        _marker(6, 2, commit=True),
        _marker(7, 1, commit=True),
    ])
    aborted = [(1, 0)]
    kept = drop_aborted(memoryview(log), aborted)
    assert _values(kept) == [b"p2-committed", b"plain", b"p1-later"]
    # Nothing aborted: the records come back as they were (no copy).
    view = memoryview(log)
    assert drop_aborted(view, []) is view
    # An aborted transaction that starts after a batch does not reach back to it.
    assert _values(drop_aborted(memoryview(log), [(1, 5)])) == [b"p1-aborted-0", b"p1-aborted-1", b"p2-committed",
                                                               b"plain"]
