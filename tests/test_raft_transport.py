"""The controller quorum's peer transport (klog.controller.raft.PeerSender) over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import struct

from klog.controller.quorum import QuorumConfig, Voter
from klog.controller.raft import _HELLO, PeerSender

_LEN = struct.Struct(">i")


async def _read_hello(reader: asyncio.StreamReader) -> None:
    await reader.readexactly(_HELLO.size)
    (cid_len,) = struct.unpack(">h", await reader.readexactly(2))
    await reader.readexactly(cid_len)


def test_a_message_sent_after_the_peer_closed_the_connection_reaches_it_on_a_new_one() -> None:
    # A peer that restarted, or refused us before it knew us as a voter, closes our connection. The sender
    # must notice and reconnect before its next message: written into the dead socket it would be lost (a
    # lost vote costs the quorum a whole election timeout).
    async def scenario() -> tuple[list[bytes], int]:
        received: list[bytes] = []
        connections = 0
        refused = asyncio.Event()
        arrived = asyncio.Event()

        async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            try:
                await _read_hello(reader)
                if connections == 1:        # the first connection is refused once its hello is read
                    refused.set()
                    return
                while True:
                    (size,) = _LEN.unpack(await reader.readexactly(_LEN.size))
                    received.append(await reader.readexactly(size))
                    arrived.set()
            except asyncio.IncompleteReadError:
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(peer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        unreachable: list[int] = []
        voters = {1: Voter(1, "127.0.0.1", 1), 2: Voter(2, "127.0.0.1", port)}
        sender = PeerSender(1, voters[2], QuorumConfig(node_id=1, voters=voters), unreachable.append)
        sender.start()
        try:
            await asyncio.wait_for(refused.wait(), 10)
            await asyncio.sleep(0.3)        # the close has reached the sender's side
            sender.send(b"vote for me")
            await asyncio.wait_for(arrived.wait(), 10)
        finally:
            await sender.stop()
            server.close()
            await server.wait_closed()
        return received, connections

    received, connections = asyncio.run(scenario())
    assert received == [b"vote for me"]
    assert connections == 2


def test_stop_ends_the_sender_even_when_a_cancellation_is_swallowed() -> None:
    # Python 3.11's wait_for can swallow a cancellation that meets a completed wait: a sender whose connection
    # attempt swallowed the stop's cancellation went on reconnecting for ever, and its node never exited.
    class SwallowingSender(PeerSender):
        swallowed = 0

        async def _open(self):  # type: ignore[override]
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                SwallowingSender.swallowed += 1   # as wait_for does when its inner wait completed meanwhile
            raise ConnectionRefusedError("peer stopping")

    async def scenario() -> None:
        voters = {1: Voter(1, "127.0.0.1", 1), 2: Voter(2, "127.0.0.1", 1)}
        sender = SwallowingSender(1, voters[2], QuorumConfig(node_id=1, voters=voters), lambda _node: None)
        sender.start()
        await asyncio.sleep(0.02)   # inside the first connection attempt
        stopping = asyncio.ensure_future(sender.stop())
        # (not wait_for: on 3.11 it too can lose its own timeout's cancellation)
        await asyncio.wait({stopping}, timeout=10)
        assert stopping.done() and sender._task is not None and sender._task.done()

    asyncio.run(scenario())
    assert SwallowingSender.swallowed >= 1


def test_stop_does_not_wait_for_a_peer_that_stopped_reading() -> None:
    # A peer that is stopping too (or paused) keeps the connection open but reads nothing: a graceful close would
    # wait for ever to flush what the sender still buffers.
    async def scenario() -> float:
        hello = asyncio.Event()

        async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_hello(reader)
            hello.set()
            await asyncio.sleep(3600)   # reads nothing more

        server = await asyncio.start_server(peer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        voters = {1: Voter(1, "127.0.0.1", 1), 2: Voter(2, "127.0.0.1", port)}
        sender = PeerSender(1, voters[2], QuorumConfig(node_id=1, voters=voters), lambda _node: None)
        sender.start()
        try:
            await asyncio.wait_for(hello.wait(), 10)
            for _ in range(200):   # far more than the sockets' buffers hold
                sender.send(b"x" * 256 * 1024)
                await asyncio.sleep(0)
            await asyncio.sleep(0.5)
            started = asyncio.get_running_loop().time()
            stopping = asyncio.ensure_future(sender.stop())
            await asyncio.wait({stopping}, timeout=10)
            assert stopping.done() and sender._task is not None and sender._task.done()
            return asyncio.get_running_loop().time() - started
        finally:
            server.close()

    assert asyncio.run(scenario()) < 5
