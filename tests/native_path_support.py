"""What the native-path tests share: the same request frames sent to a broker with a native path and to one
without, their answers side by side (tests/test_native_produce_path.py, tests/test_native_fetch_path.py)."""

from __future__ import annotations

from typing import Any

import klog
from klog.testing.wire import WireClient


class BrokerPair:
    """Two brokers, the first with the native path on; ``stat`` is the broker stat counting what it served
    natively. Subclasses may send each broker its own frame (:meth:`frames`) and mask what differs between two
    brokers in an answer (:meth:`normalized`)."""

    stat = ""

    def __init__(self, native: klog.Broker, python: klog.Broker) -> None:
        self.brokers = (native, python)
        self.wires = [WireClient(b.host, b.port) for b in self.brokers]
        self.cid = 0

    def frames(self, frame_of: Any, cid: int) -> list[bytes]:
        frame = frame_of(cid)
        return [frame, frame]

    def normalized(self, answer: bytes, which: int, **options: Any) -> bytes:
        return answer

    def answers(self, frame_of: Any, *, expect_answer: bool = True, **options: Any) -> tuple[bytes, bytes]:
        self.cid += 1
        for wire, frame in zip(self.wires, self.frames(frame_of, self.cid)):
            wire.send_raw(frame)
        if not expect_answer:
            return b"", b""
        native, python = (self.normalized(wire.read_frame(), i, **options) for i, wire in enumerate(self.wires))
        return native, python

    def same(self, frame_of: Any, **options: Any) -> bytes:
        native, python = self.answers(frame_of, **options)
        assert native == python
        return native

    def native_served(self) -> int:
        served = [b.stats()[self.stat] for b in self.brokers]
        assert served[1] == 0, "the broker without the native path served a request natively"
        return served[0]

    def close(self) -> None:
        for wire in self.wires:
            wire.close()
