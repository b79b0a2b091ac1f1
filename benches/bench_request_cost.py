"""Broker CPU per request, by API and size: klog vs Apache Kafka 4.x, paired in one run (issue 38, item 2).

Full run (about 10 minutes; writes ``benches/results/request_cost.json``)::

    PYTHONPATH=benches .venv/bin/python benches/bench_request_cost.py [--rounds 5] [--scale 1] [--only produce]

Short run (< 60 s, one round at a small volume): ``make bench`` collects ``test_request_cost_short`` below, or
``python benches/bench_request_cost.py --short``.

What is measured. Both brokers run at once (sidebyside.brokers: same Kafka properties, each its own port and data
directory). For each case and round the request driver sends a fixed number of identical, pre-encoded request
frames (klog.protocol encodes each frame once) over raw non-blocking sockets, several in flight per connection,
and counts the answers by their size prefixes without decoding them (one answer per case and round is decoded and
its error codes checked first). The broker's CPU is utime+stime from ``/proc/<pid>/stat`` of the broker process
(and any process it started) across the run, then again over an idle window of the same wall time right after;
the figure is (busy CPU - idle CPU) / requests, so Kafka's background work (GC, log cleaner and quorum timers)
does not count against it (the gross figure is kept too). Rounds alternate which broker goes first; the table
gives medians over the rounds.

Cases (``CASES``):
- ``produce/acks=A/S``: Produce v9, one record of S bytes (100 B, 1 KiB, 16 KiB) per request, one partition.
  acks=0 has no answers: every ``ACKS0_GROUP`` frames are followed by one Metadata request whose answer says the
  broker has read them (a connection's requests are handled in order); that Metadata is counted in the cost
  (1 of ``ACKS0_GROUP + 1`` requests).
- ``produce-idempotent/acks=-1/100B``: the one-record Produce of an idempotent producer (Kafka's Java producer by
  default since 3.0: acks=all, at most 5 requests in flight): each connection first takes a producer id
  (InitProducerId), then sends its batches with sequence numbers 0, 1, 2, ...; each connection's last answer is
  decoded and checked.
- ``fetch/caught-up``: Fetch v12 (no session) at the log end of an empty partition, ``max_wait_ms=FETCH_WAIT_MS``,
  ``min_bytes=1``: each answer is an empty long poll that expired. One request in flight per connection (Kafka
  reads no next request from a connection while one is open), many connections.
- ``fetch/session-caught-up``: as ``fetch/caught-up``, but each connection first opens a KIP-227 fetch session (a
  full fetch, epoch 0, before the CPU is read) and then sends its incremental fetches (epochs 1, 2, ...: no
  partitions named, the session's one partition caught up), as Kafka's Java consumer does.
- ``fetch/behind``: Fetch v12 from offset 0 of a filled partition, ``partition_max_bytes=FETCH_BEHIND_BYTES``.
- ``metadata``: Metadata v12 for one topic. ``heartbeat``: Heartbeat v4 of a member of a classic group (joined
  with JoinGroup v9/SyncGroup v5 before). ``offset-commit``: OffsetCommit v8 of one partition by that member.

Many small requests (``run_many``): MANY_CONNECTIONS connections, each a closed loop of one one-record Produce
(MANY_SIZE bytes, acks=MANY_ACKS) in flight, driven by ``benches/loadgen`` (Go, standard library only, built into
``.cache/loadgen`` on first use), which reports its own CPU beside the broker's so a reader sees who limited the
rate. ``--flamegraph DIR`` instead profiles klog alone under FLAMEGRAPH_CASES with ``py-spy record --native`` (the
``bench`` extra) and prints where the time went; ``--docs`` rewrites the tables of docs/performance.md's "Cost per
request" section from the JSON.

The driver is one Python thread sharing the machine's 2 cores with the brokers; it does not limit the CPU figure
(read from the broker only), only the rate. Targets (issue 38: klog <= 0.3x Kafka per small request) are reported,
not asserted: this machine is shared and the figures are for docs/performance.md ("Cost per request").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHES = Path(__file__).resolve().parent
if str(BENCHES) not in sys.path:  # run as a script: make the sidebyside package importable
    sys.path.insert(0, str(BENCHES))

from klog.protocol import Struct, decode_response, encode_request  # noqa: E402
from klog.protocol.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription  # noqa: E402
from klog.protocol.errors import ErrorCode  # noqa: E402
from klog.records import encode_batch  # noqa: E402
from sidebyside.brokers import LAUNCHERS, RunningBroker, shared_properties  # noqa: E402
from sidebyside.procstat import cpu_seconds, thread_cpu_delta, thread_cpu_seconds  # noqa: E402

RESULTS = BENCHES / "results" / "request_cost.json"
SIZES = {"100B": 100, "1KiB": 1024, "16KiB": 16384}
#: acks=0 frames sent between two Metadata requests that mark how far the broker has read.
ACKS0_GROUP = 200
#: How long an empty long-poll Fetch waits before the broker answers it (a consumer's fetch.max.wait.ms is 500).
FETCH_WAIT_MS = 100
#: Connections of the long-poll case: each has one Fetch open for FETCH_WAIT_MS, so they set its rate.
FETCH_WAIT_CONNECTIONS = 100
FETCH_BEHIND_BYTES = 65536
#: Records (16 KiB, one a batch) written to the fetch-behind partition before the rounds.
FETCH_BEHIND_FILL = 64
SESSION_TIMEOUT_MS = 1_800_000  # Kafka's group.max.session.timeout.ms default: the member outlives the run
GROUP = "rc-group"
PRODUCE_TOPIC, FETCH_TOPIC, IDLE_TOPIC = "rc-produce", "rc-fetch", "rc-idle"
#: The idle partition holds the one record that proved it takes writes: a caught-up Fetch reads at offset 1.
IDLE_LOG_END = 1
#: How long one request may take to be answered before the driver gives up (a broker that stopped answering).
ANSWER_TIMEOUT_S = 60.0
#: Each case runs once at this share of its volume on both brokers before the measured rounds.
WARMUP_SHARE = 0.5
CLIENT_ID = "rc-bench"
#: The "many small requests" workload: connections, each a closed loop of one-record Produce requests.
MANY_CONNECTIONS, MANY_SIZE, MANY_ACKS = 500, 100, 1
MANY_SECONDS = 10.0
#: Unmeasured seconds at the start of each many-connections run (connection set-up, the JVM's compilation).
MANY_WARMUP_S = 2.0
LOADGEN_SOURCE = BENCHES / "loadgen"


@dataclass(frozen=True)
class Case:
    name: str
    requests: int            # per round at scale 1
    connections: int
    window: int              # requests in flight per connection
    frames: Callable[[Ctx], Frames]
    small: bool = True       # a "small request" of issue 38's target (<= 0.3x Kafka)


@dataclass
class Frames:
    frame: bytes             # the request sent over and over
    api_key: int
    api_version: int
    acks0: bool = False      # no answers: send ACKS0_GROUP of these, then `marker`
    marker: bytes = b""
    #: a fetch session's incremental fetch (session id, epoch) -> frame: ``frame`` opens a session on each
    #: connection before the measurement, and each connection then sends these at epochs 1, 2, ... (an idempotent
    #: producer's likewise: ``frame`` is its InitProducerId, each request the producer's next batch)
    session: Callable[[int, int], bytes] | None = None
    #: the session's id in ``frame``'s decoded answer
    session_id: Callable[[Any], int] = lambda body: int(body.session_id)
    #: (api key, version) of the session's requests: each connection's last answer is decoded and checked
    session_api: tuple[int, int] = (1, 12)


@dataclass
class Ctx:
    """Per broker: what the frames need (the group member joined before the rounds)."""

    broker: RunningBroker
    host: str = ""
    port: int = 0
    member_id: str = ""
    generation: int = -1


def _produce_body(acks: int, size: int) -> Struct:
    batch = encode_batch([{"value": (os.urandom(64) * (size // 64 + 1))[:size]}])
    return Struct(transactional_id=None, acks=acks, timeout_ms=30000,
                  topic_data=[Struct(name=PRODUCE_TOPIC, partition_data=[Struct(index=0, records=batch)])])


def _metadata_frame() -> bytes:
    return encode_request(3, 12, 7, CLIENT_ID, Struct(
        topics=[Struct(topic_id=uuid.UUID(int=0), name=PRODUCE_TOPIC)], allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False))


def _produce(acks: int, size: int) -> Callable[[Ctx], Frames]:
    def build(_: Ctx) -> Frames:
        frame = encode_request(0, 9, 1, CLIENT_ID, _produce_body(acks, size))
        return Frames(frame, 0, 9, acks0=acks == 0, marker=_metadata_frame())
    return build


def _init_producer_frame() -> bytes:
    """InitProducerId v4 of an idempotent (not transactional) producer, as the Java client sends it."""
    return encode_request(22, 4, 3, CLIENT_ID, Struct(transactional_id=None, transaction_timeout_ms=2**31 - 1,
                                                      producer_id=-1, producer_epoch=-1))


def _new_producer_id(body: Any) -> int:
    if body.producer_epoch != 0:   # the batches below are of epoch 0
        raise RuntimeError(f"InitProducerId answered epoch {body.producer_epoch} for a new producer id")
    return int(body.producer_id)


def _idempotent_produce(size: int) -> Callable[[Ctx], Frames]:
    """Produce v9 (acks=all) of one record of ``size`` bytes from an idempotent producer (Kafka's Java producer
    since 3.0 by default): each connection is its own producer (InitProducerId first), each request its next
    sequence number, so every batch is in sequence and appended (one identical frame would be a duplicate)."""
    value = (os.urandom(64) * (size // 64 + 1))[:size]

    def frame(producer_id: int, request: int) -> bytes:
        batch = encode_batch([{"value": value}], producer_id=producer_id, producer_epoch=0,
                             base_sequence=request - 1)
        return encode_request(0, 9, 1, CLIENT_ID, Struct(
            transactional_id=None, acks=-1, timeout_ms=30000,
            topic_data=[Struct(name=PRODUCE_TOPIC, partition_data=[Struct(index=0, records=batch)])]))

    def build(_: Ctx) -> Frames:
        return Frames(_init_producer_frame(), 22, 4, session=frame, session_id=_new_producer_id, session_api=(0, 9))
    return build


def _fetch_frame(topic: str | None, max_wait_ms: int, offset: int, session_id: int = 0, epoch: int = -1) -> bytes:
    """Fetch v12 of ``topic``'s partition 0 from ``offset`` (None: no partitions, a session's unchanged fetch)."""
    topics = [] if topic is None else [Struct(topic=topic, partitions=[
        Struct(partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
               partition_max_bytes=FETCH_BEHIND_BYTES)])]
    return encode_request(1, 12, 2, CLIENT_ID, Struct(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=FETCH_BEHIND_BYTES, isolation_level=0,
        session_id=session_id, session_epoch=epoch, topics=topics, forgotten_topics_data=[], rack_id=""))


def _fetch(topic: str, max_wait_ms: int, offset: int) -> Callable[[Ctx], Frames]:
    def build(_: Ctx) -> Frames:
        return Frames(_fetch_frame(topic, max_wait_ms, offset), 1, 12)
    return build


def _session_fetch(topic: str, max_wait_ms: int, offset: int) -> Callable[[Ctx], Frames]:
    def build(_: Ctx) -> Frames:
        return Frames(_fetch_frame(topic, 0, offset, epoch=0), 1, 12,
                      session=lambda session_id, epoch: _fetch_frame(None, max_wait_ms, offset, session_id, epoch))
    return build


def _metadata(_: Ctx) -> Frames:
    return Frames(_metadata_frame(), 3, 12)


def _heartbeat(ctx: Ctx) -> Frames:
    return Frames(encode_request(12, 4, 4, CLIENT_ID, Struct(
        group_id=GROUP, generation_id=ctx.generation, member_id=ctx.member_id, group_instance_id=None)), 12, 4)


def _offset_commit(ctx: Ctx) -> Frames:
    return Frames(encode_request(8, 8, 5, CLIENT_ID, Struct(
        group_id=GROUP, generation_id_or_member_epoch=ctx.generation, member_id=ctx.member_id,
        group_instance_id=None, topics=[Struct(name=PRODUCE_TOPIC, partitions=[Struct(
            partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="")])])), 8, 8)


CASES = [
    *(Case(f"produce/acks={acks}/{label}", 20_000 if size < 16384 else 4_000, 4, 16, _produce(acks, size),
           small=size == 100 and acks != 0)
      for acks in (0, 1, -1) for label, size in SIZES.items()),
    # the one-record Produce as Kafka's Java producer sends it by default (idempotent, acks=all, 5 in flight)
    Case("produce-idempotent/acks=-1/100B", 20_000, 4, 5, _idempotent_produce(100)),
    # 9,000 long polls (about 9 s at FETCH_WAIT_MS on FETCH_WAIT_CONNECTIONS): at klog's ~17 µs each that is 15 of
    # /proc's 10 ms CPU ticks, where 3,000 were 5 (one tick more or less moved the figure by a fifth)
    Case("fetch/caught-up", 9_000, FETCH_WAIT_CONNECTIONS, 1, _fetch(IDLE_TOPIC, FETCH_WAIT_MS, IDLE_LOG_END)),
    Case("fetch/session-caught-up", 9_000, FETCH_WAIT_CONNECTIONS, 1,
         _session_fetch(IDLE_TOPIC, FETCH_WAIT_MS, IDLE_LOG_END)),
    Case("fetch/behind", 10_000, 2, 4, _fetch(FETCH_TOPIC, 0, 0), small=False),
    Case("metadata", 20_000, 4, 16, _metadata),
    Case("heartbeat", 20_000, 4, 16, _heartbeat),
    Case("offset-commit", 20_000, 4, 16, _offset_commit),
]


# -- one request, answered and decoded (set-up and the per-round check) --------------------------------------

def _exchange(ctx: Ctx, frame: bytes, api_key: int, api_version: int) -> Struct:
    with socket.create_connection((ctx.host, ctx.port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(frame)
        size = int.from_bytes(_recv_exact(sock, 4), "big")
        return decode_response(api_key, api_version, _recv_exact(sock, size))[1]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _error_codes(value: Any, path: str = "") -> list[str]:
    """Every non-zero ``error_code`` in a decoded answer, with where it is."""
    if isinstance(value, Struct):
        found = []
        for key, item in vars(value).items():
            if key == "error_code" and item:
                found.append(f"{path or 'body'}: {ErrorCode(item).name}")
            else:
                found += _error_codes(item, f"{path}.{key}" if path else key)
        return found
    if isinstance(value, list):
        return [e for i, item in enumerate(value) for e in _error_codes(item, f"{path}[{i}]")]
    return []


def _checked(ctx: Ctx, frame: bytes, api_key: int, api_version: int) -> Struct:
    body = _exchange(ctx, frame, api_key, api_version)
    errors = _error_codes(body)
    if errors:
        raise RuntimeError(f"{ctx.broker.name}: api {api_key} v{api_version} answered {errors}")
    return body


def prepare(ctx: Ctx) -> None:
    """Topics (one partition each, leader known), a filled fetch-behind partition and a joined group member."""
    ctx.host, port = ctx.broker.bootstrap.rsplit(":", 1)
    ctx.port = int(port)
    _checked(ctx, encode_request(19, 5, 1, CLIENT_ID, Struct(topics=[
        Struct(name=t, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        for t in (PRODUCE_TOPIC, FETCH_TOPIC, IDLE_TOPIC)], timeout_ms=30000, validate_only=False)), 19, 5)
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    for topic in (PRODUCE_TOPIC, FETCH_TOPIC, IDLE_TOPIC):  # until each partition has a leader that takes writes
        frame = encode_request(0, 9, 1, CLIENT_ID, Struct(transactional_id=None, acks=1, timeout_ms=30000,
                               topic_data=[Struct(name=topic, partition_data=[Struct(index=0, records=encode_batch(
                                   [{"value": b"warm"}]))])]))
        while True:
            body = _exchange(ctx, frame, 0, 9)
            if not _error_codes(body):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ctx.broker.name}: {topic} takes no writes: {_error_codes(body)}")
            time.sleep(0.1)
    while errors := _error_codes(_exchange(ctx, _init_producer_frame(), 22, 4)):  # Kafka's producer ids come
        if time.monotonic() > deadline:                                          # in blocks from its controller
            raise RuntimeError(f"{ctx.broker.name}: no producer ids: {errors}")
        time.sleep(0.1)
    fill = encode_request(0, 9, 1, CLIENT_ID, Struct(
        transactional_id=None, acks=1, timeout_ms=30000, topic_data=[Struct(name=FETCH_TOPIC, partition_data=[
            Struct(index=0, records=encode_batch([{"value": os.urandom(16384)}]))])]))
    socks = connect(ctx.host, ctx.port, 1)
    drive(socks, Frames(fill, 0, 9), FETCH_BEHIND_FILL, 8)
    socks[0].close()
    join = _join(ctx)
    ctx.member_id, ctx.generation = join.member_id, join.generation_id
    assignment = encode_assignment(Assignment({PRODUCE_TOPIC: [0]}, version=0))
    _checked(ctx, encode_request(14, 5, 1, CLIENT_ID, Struct(
        group_id=GROUP, generation_id=ctx.generation, member_id=ctx.member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name="range",
        assignments=[Struct(member_id=ctx.member_id, assignment=assignment)])), 14, 5)


def _join(ctx: Ctx) -> Struct:
    member_id = ""
    subscription = encode_subscription(Subscription([PRODUCE_TOPIC], version=0))
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    # FindCoordinator makes Kafka create and load the offsets topic; until then the group has no coordinator.
    while (errors := _error_codes(_exchange(ctx, encode_request(10, 4, 1, CLIENT_ID, Struct(
            key_type=0, coordinator_keys=[GROUP])), 10, 4))) and time.monotonic() < deadline:
        time.sleep(0.2)
    if errors:
        raise RuntimeError(f"{ctx.broker.name}: no group coordinator: {errors}")
    retriable = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
    while True:
        body = _exchange(ctx, encode_request(11, 9, 1, CLIENT_ID, Struct(
            group_id=GROUP, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=30000, member_id=member_id,
            group_instance_id=None, protocol_type="consumer", protocol_name="range", reason=None,
            protocols=[Struct(name="range", metadata=subscription)])), 11, 9)
        if body.error_code == ErrorCode.NONE:
            return body
        if body.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # JoinGroup v4+: join again with the id it gave
            member_id = body.member_id
        elif body.error_code not in retriable or time.monotonic() > deadline:
            raise RuntimeError(f"{ctx.broker.name}: JoinGroup answered {ErrorCode(body.error_code).name}")
        else:  # the offsets partition is still being loaded or led: a client retries
            time.sleep(0.2)


# -- the driver -------------------------------------------------------------------------------------------------

@dataclass(eq=False)  # hashed by identity (the pending-output map)
class _Conn:
    sock: socket.socket
    left: int                # frames (or acks=0 groups) still to send
    open: int = 0            # sent and not answered
    buf: bytearray = field(default_factory=bytearray)
    last: bytes = b""        # its last answer (without the size prefix)
    session_id: int = 0      # the connection's fetch session (Frames.session)
    epoch: int = 0           # its last epoch sent


def connect(host: str, port: int, connections: int) -> list[socket.socket]:
    """The driver's sockets, opened before a measurement so that connection set-up is not in its CPU figure."""
    socks = []
    for _ in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        socks.append(sock)
    return socks


def open_sessions(socks: list[socket.socket], frames: Frames) -> list[int]:
    """Open a fetch session on each socket (``frames.frame``, a full fetch at epoch 0), or an idempotent producer:
    their ids."""
    ids = []
    for sock in socks:
        sock.setblocking(True)
        sock.sendall(frames.frame)
        size = int.from_bytes(_recv_exact(sock, 4), "big")
        ids.append(frames.session_id(decode_response(frames.api_key, frames.api_version, _recv_exact(sock, size))[1]))
        sock.setblocking(False)
    if not all(ids):
        raise RuntimeError("a fetch session or producer id was not opened")
    return ids


def drive(socks: list[socket.socket], frames: Frames, requests: int, window: int,
          sessions: list[int] | None = None, last_answers: list[bytes] | None = None) -> int:
    """Send ``requests`` copies of ``frames.frame`` over ``socks``, ``window`` in flight on each, and wait for every
    answer (for acks=0 frames: for the marker after each ACKS0_GROUP of them). Returns the number of requests the
    broker handled, markers included. The caller closes the sockets (after reading the broker's CPU)."""
    unit = (frames.frame * ACKS0_GROUP + frames.marker) if frames.acks0 else frames.frame
    per_unit = ACKS0_GROUP + 1 if frames.acks0 else 1
    units = max(1, requests // per_unit)
    window = 1 if frames.acks0 else window
    sel = selectors.DefaultSelector()
    conns = []
    for i, sock in enumerate(socks):
        conn = _Conn(sock, units // len(socks) + (1 if i < units % len(socks) else 0),
                     session_id=sessions[i] if sessions else 0)
        conns.append(conn)
        sel.register(sock, selectors.EVENT_READ, conn)
    pending_out: dict[_Conn, memoryview] = {}

    def send(conn: _Conn, n: int) -> None:
        n = min(n, conn.left)
        if n <= 0:
            return
        conn.left -= n
        conn.open += n
        if frames.session is not None:   # each request the session's next epoch
            data = memoryview(b"".join(frames.session(conn.session_id, conn.epoch + 1 + k) for k in range(n)))
            conn.epoch += n
        else:
            data = memoryview(unit * n)
        if conn in pending_out:
            pending_out[conn] = memoryview(bytes(pending_out[conn]) + bytes(data))
            return
        try:
            sent = conn.sock.send(data)
        except BlockingIOError:
            sent = 0
        if sent < len(data):
            pending_out[conn] = data[sent:]
            sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    try:
        for conn in conns:
            send(conn, window)
        waiting = sum(c.left + c.open for c in conns)
        last_answer = time.monotonic()
        while waiting:
            events = sel.select(timeout=1.0)
            if not events and time.monotonic() - last_answer > ANSWER_TIMEOUT_S:
                raise TimeoutError(f"{waiting} requests unanswered for {ANSWER_TIMEOUT_S:.0f} s")
            for key, mask in events:
                conn = key.data
                if mask & selectors.EVENT_WRITE:
                    out = pending_out[conn]
                    sent = conn.sock.send(out)
                    if sent < len(out):
                        pending_out[conn] = out[sent:]
                    else:
                        del pending_out[conn]
                        sel.modify(conn.sock, selectors.EVENT_READ, conn)
                if mask & selectors.EVENT_READ:
                    data = conn.sock.recv(1 << 20)
                    if not data:
                        raise ConnectionError("broker closed a connection")
                    buf = conn.buf
                    buf += data
                    pos, answered = 0, 0
                    while len(buf) - pos >= 4:
                        end = pos + 4 + int.from_bytes(buf[pos:pos + 4], "big")
                        if end > len(buf):
                            break
                        if last_answers is not None and conn.left == 0 and end == len(buf):
                            conn.last = bytes(buf[pos + 4:end])
                        pos, answered = end, answered + 1
                    if pos:
                        del buf[:pos]
                    if answered:
                        last_answer = time.monotonic()
                        conn.open -= answered
                        waiting -= answered
                        send(conn, answered)
    finally:
        for conn in conns:
            sel.unregister(conn.sock)
        sel.close()
    if last_answers is not None:
        last_answers.extend(conn.last for conn in conns if conn.last)
    return units * per_unit


# -- measurement ------------------------------------------------------------------------------------------------

def measure(ctx: Ctx, case: Case, scale: float, *, idle_window: bool = True) -> dict[str, float]:
    frames = case.frames(ctx)
    if not frames.acks0:
        _checked(ctx, frames.frame, frames.api_key, frames.api_version)
    requests = max(case.connections * case.window, int(case.requests * scale))
    pid = ctx.broker.pid
    socks = connect(ctx.host, ctx.port, case.connections)
    sessions = open_sessions(socks, frames) if frames.session is not None else None
    cpu0, t0, own0 = cpu_seconds(pid), time.monotonic(), time.process_time()
    last_answers: list[bytes] = []
    try:
        handled = drive(socks, frames, requests, case.window, sessions, last_answers)
        cpu1, t1, own1 = cpu_seconds(pid), time.monotonic(), time.process_time()
    finally:
        for sock in socks:
            sock.close()
    if sessions is not None:   # requests that differ: each connection's last answer is checked after the run
        if len(last_answers) != len(socks):
            raise RuntimeError(f"{ctx.broker.name}: {case.name}: {len(last_answers)} of {len(socks)} last answers")
        for answer in last_answers:
            errors = _error_codes(decode_response(*frames.session_api, answer)[1])
            if errors:
                raise RuntimeError(f"{ctx.broker.name}: {case.name} answered {errors}")
    wall = t1 - t0
    if idle_window:
        time.sleep(wall)  # the idle window: the same wall time, no requests
    idle = cpu_seconds(pid) - cpu1 if idle_window else 0.0
    busy = cpu1 - cpu0
    return {"requests": handled, "wall_s": wall, "cpu_s": busy, "idle_cpu_s": idle,
            "requests_per_s": handled / wall, "driver_us": (own1 - own0) / handled * 1e6,
            "gross_us": busy / handled * 1e6, "net_us": max(0.0, busy - idle) / handled * 1e6}


#: klog-only settings of this run (``--klog-config KEY=VALUE``), e.g. klog.fetch.native.enable=false
KLOG_CONFIG: dict[str, str] = {}
#: settings of a third broker, klog with KLOG_CONFIG and these (``--variant KEY=VALUE``), measured in the same rounds
#: as "variant" (e.g. klog.network.native.front.enable=true against klog without it); empty: no third broker
VARIANT_CONFIG: dict[str, str] = {}


def _names() -> tuple[str, ...]:
    return ("klog", "kafka", "variant") if VARIANT_CONFIG else ("klog", "kafka")


@contextlib.contextmanager
def both_brokers(workdir: Path) -> Iterator[dict[str, Ctx]]:
    props = {**shared_properties(), "auto.create.topics.enable": "false"}
    with contextlib.ExitStack() as stack:
        configs = {"klog": {**props, **KLOG_CONFIG}, "kafka": props, "variant": {**props, **KLOG_CONFIG, **VARIANT_CONFIG}}
        ctxs = {name: Ctx(stack.enter_context(LAUNCHERS["klog" if name == "variant" else name](workdir / name,
                                                                                             configs[name])))
                for name in _names()}
        for ctx in ctxs.values():
            prepare(ctx)
        yield ctxs


def run(workdir: Path, rounds: int, scale: float, only: str = "", log: Callable[[str], None] = print, *,
        many_seconds: float = 0.0, many_connections: int = MANY_CONNECTIONS) -> dict:
    """The cases whose name contains ``only``, ``rounds`` paired rounds at ``scale``; then, if ``many_seconds``,
    the many-connections workload (``rounds`` paired runs of that length)."""
    cases = [c for c in CASES if only in c.name]
    names = _names()
    samples: dict[str, dict[str, list[dict[str, float]]]] = {c.name: {n: [] for n in names} for c in cases}
    started, load_at_start = time.time(), os.getloadavg()[0]
    with both_brokers(workdir) as ctxs:
        versions = {name: ctx.broker.version for name, ctx in ctxs.items()}
        for case in cases:  # warm-up, not counted: the JVM compiles Kafka's request path on first use
            for ctx in ctxs.values():
                measure(ctx, case, scale * WARMUP_SHARE, idle_window=False)
        for r in range(rounds):
            for i, case in enumerate(cases):
                shift = (r + i) % len(names)
                for name in names[shift:] + names[:shift]:
                    m = measure(ctxs[name], case, scale)
                    samples[case.name][name].append(m)
                    log(f"round {r + 1}/{rounds} {case.name:24} {name:7} {m['requests']:7} req "
                        f"{m['requests_per_s']:9,.0f} req/s  {m['net_us']:7.1f} us net  {m['gross_us']:7.1f} us gross")
        many = run_many(ctxs, workdir, rounds, many_seconds, many_connections, log) if many_seconds else None
    table = {}
    for case in cases:
        row: dict[str, Any] = {"small": case.small}
        for name in names:
            s = samples[case.name][name]
            row[name] = {k: statistics.median(m[k] for m in s) for k in ("net_us", "gross_us", "requests_per_s", "driver_us")}
        row["net_ratio"] = _ratio(row["klog"]["net_us"], row["kafka"]["net_us"])
        row["gross_ratio"] = _ratio(row["klog"]["gross_us"], row["kafka"]["gross_us"])
        if "variant" in row:
            row["variant_net_ratio"] = _ratio(row["variant"]["net_us"], row["kafka"]["net_us"])
        table[case.name] = row
    return {"measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "rounds": rounds,
            "scale": scale, "versions": versions, "cpus": os.cpu_count(), "cases": table, "samples": samples,
            "many_connections": many, "loadavg_1m": [load_at_start, os.getloadavg()[0]],
            **({"variant": VARIANT_CONFIG} if VARIANT_CONFIG else {})}


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def format_table(result: dict) -> str:
    variant = "variant" in result
    lines = ["| request | Kafka µs CPU/req | klog µs CPU/req | klog/Kafka | Kafka gross µs | klog gross µs | "
             "klog/Kafka gross | Kafka req/s | klog req/s |" +
             (" variant µs CPU/req | variant/Kafka | variant req/s |" if variant else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if variant else "")]

    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}×"

    for name, row in result["cases"].items():
        k, o = row["kafka"], row["klog"]
        line = (f"| {name} | {k['net_us']:.1f} | {o['net_us']:.1f} | {x(row['net_ratio'])} | "
                f"{k['gross_us']:.1f} | {o['gross_us']:.1f} | {x(row['gross_ratio'])} | "
                f"{k['requests_per_s']:,.0f} | {o['requests_per_s']:,.0f} |")
        if variant:
            v = row["variant"]
            line += f" {v['net_us']:.1f} | {x(row['variant_net_ratio'])} | {v['requests_per_s']:,.0f} |"
        lines.append(line)
    return "\n".join(lines)


# -- docs/performance.md: the tables of the "Cost per request" section --------------------------------------------

DOCS = BENCHES.parent / "docs" / "performance.md"
TABLES_BEGIN = "<!-- cost per request: tables begin (written by benches/bench_request_cost.py --docs) -->"
TABLES_END = "<!-- cost per request: tables end -->"


def docs_tables(result: dict) -> str:
    small = [row["net_ratio"] for row in result["cases"].values() if row["small"] and row["net_ratio"]]
    geo = statistics.geometric_mean(small) if small else float("nan")
    load = result.get("loadavg_1m") or [None, None]
    load_text = "not recorded" if None in load else f"{load[0]:.1f} at the start, {load[1]:.1f} at the end"
    lines = [f"Measured {result['measured']}, {result['rounds']} paired rounds at scale {result['scale']} "
             f"({', '.join(result['versions'].values())}, {result['cpus']} CPUs; 1-minute load average "
             f"{load_text}). µs CPU/req is the broker's CPU net of its idle CPU over the same wall time, per request; "
             "gross includes the idle CPU; req/s is what the one-thread Python driver reached (it shares the cores, "
             "so it is not the broker's ceiling). Medians over the rounds.", "",
             format_table(result), "",
             f"Geometric mean of klog/Kafka over the small requests (one-record Produce acks=1/all at 100 B, the "
             f"idempotent producer's, the caught-up Fetch, Metadata, Heartbeat, OffsetCommit): **{geo:.2f}×** (issue 38's target: ≤ 0.3×)."]
    if result.get("many_connections"):
        many = result["many_connections"]
        lines += ["", f"Many small requests: {many['workload']}, benches/loadgen (Go, one goroutine per connection, "
                  f"a pre-encoded one-record Produce, one request in flight per connection), {many['seconds']:.0f} s "
                  "per run after a 2 s warm-up, medians over the paired runs:", "", format_many(many)]
    return "\n".join(lines)


def write_docs(result: dict, md: Path = DOCS) -> None:
    """Replace the tables between TABLES_BEGIN and TABLES_END in ``md`` (the section's prose stays as it is)."""
    text = md.read_text()
    start, stop = text.find(TABLES_BEGIN), text.find(TABLES_END)
    if start < 0 or stop < start:
        raise ValueError(f"{md}: no {TABLES_BEGIN!r} ... {TABLES_END!r} block to fill")
    md.write_text(text[:start + len(TABLES_BEGIN)] + "\n" + docs_tables(result) + "\n" + text[stop:])


# -- many connections, driven by benches/loadgen (Go) -------------------------------------------------------------



def loadgen_binary() -> Path | None:
    """benches/loadgen built into .cache/loadgen (rebuilt when its source is newer); None without a Go toolchain."""
    cache = BENCHES.parent / ".cache" / "loadgen"
    binary = cache / "loadgen"
    newest = max(f.stat().st_mtime for f in LOADGEN_SOURCE.iterdir())
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        return None
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOCACHE": str(cache / "gocache"), "GOFLAGS": "-buildvcs=false", "GOTOOLCHAIN": "local"}
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=LOADGEN_SOURCE, env=env, check=True, timeout=600)
    return binary


def many_connections(ctx: Ctx, binary: Path, workdir: Path, seconds: float, connections: int) -> dict[str, float]:
    """Broker CPU and the load generator's own CPU over one run of the many-connections workload."""
    body = _produce_body(MANY_ACKS, MANY_SIZE)
    frame = encode_request(0, 9, 1, CLIENT_ID, body)
    _checked(ctx, frame, 0, 9)
    path = workdir / "many.frame"
    path.write_bytes(frame)
    with subprocess.Popen([str(binary), "-addr", ctx.broker.bootstrap, "-frame", str(path), "-connections",
                           str(connections), "-warmup", str(MANY_WARMUP_S), "-seconds", str(seconds)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()  # "start": the warm-up is over
            cpu0, t0 = cpu_seconds(ctx.broker.pid), time.monotonic()
            threads0 = thread_cpu_seconds(ctx.broker.pid)
            if line.strip() == "start":
                line = proc.stdout.readline()  # the result, printed before the loadgen closes its connections
            cpu1, wall = cpu_seconds(ctx.broker.pid), time.monotonic() - t0
            threads = thread_cpu_delta(threads0, thread_cpu_seconds(ctx.broker.pid))
            proc.wait(timeout=ANSWER_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        if proc.returncode != 0 or not line.startswith("{"):
            raise RuntimeError(f"{ctx.broker.name}: loadgen failed ({proc.returncode}): {line[-500:]} "
                               f"{proc.stderr.read()[-500:]}")
    out = json.loads(line)
    client_cpu = out["cpu_user_s"] + out["cpu_sys_s"]
    per_request = 1e6 / out["requests"]
    return {"requests_per_s": out["requests_per_s"], "p50_ms": out["p50_ms"], "p99_ms": out["p99_ms"],
            "p999_ms": out["p999_ms"], "broker_cores": (cpu1 - cpu0) / wall,
            "broker_us": (cpu1 - cpu0) * per_request, "client_cores": client_cpu / out["seconds"],
            "client_us": client_cpu * per_request,
            # the kernel's share of the broker's CPU (system time: socket reads and writes, page-cache writes,
            # wake-ups), and the load generator's
            "broker_system_us": sum(system for _, system in threads.values()) * per_request,
            "client_system_us": out["cpu_sys_s"] * per_request,
            # which of the broker's threads paid: µs per request (user + system) by thread group
            "threads_us": {name: (user + system) * per_request for name, (user, system) in threads.items()}}


def many_medians(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over one broker's many-connections runs (a thread group's over the runs it appears in)."""
    out: dict[str, Any] = {k: statistics.median(m[k] for m in samples)
                           for k, v in samples[0].items() if isinstance(v, (int, float))}
    names = sorted({name for m in samples for name in m.get("threads_us", {})})
    out["threads_us"] = {name: statistics.median(m["threads_us"][name] for m in samples if name in m["threads_us"])
                         for name in names}
    return out


def cores_ceiling(many: dict[str, Any], klog_broker_key: str = "broker_us") -> float:
    """The requests/s ratio klog/Kafka the two shared cores allow when each request costs the broker
    ``many[b][klog_broker_key]`` µs (Kafka's: ``broker_us``) and the load generator its own µs:
    (Kafka's broker + generator µs) / (klog's broker + generator µs)."""
    kafka, klog = many["kafka"], many["klog"]
    return (kafka["broker_us"] + kafka["client_us"]) / (klog[klog_broker_key] + klog["client_us"])


def run_many(ctxs: dict[str, Ctx], workdir: Path, rounds: int, seconds: float, connections: int,
             log: Callable[[str], None]) -> dict[str, Any] | None:
    binary = loadgen_binary()
    if binary is None:
        log("many connections: no Go toolchain, skipped")
        return None
    names = tuple(ctxs)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            m = many_connections(ctxs[name], binary, workdir, seconds, connections)
            samples[name].append(m)
            log(f"round {r + 1}/{rounds} connections/{connections}c {name:7} {m['requests_per_s']:9,.0f} req/s "
                f"p99 {m['p99_ms']:.1f} ms broker {m['broker_cores']:.2f} cores client {m['client_cores']:.2f} cores")
    return {"workload": f"{connections}c/{MANY_SIZE}B/acks={MANY_ACKS}", "seconds": seconds,
            **{name: many_medians(s) for name, s in samples.items()},
            "samples": samples}


def format_many(many: dict[str, Any]) -> str:
    keys = [("requests/s", "requests_per_s", "{:,.0f}"), ("p50 ms", "p50_ms", "{:.2f}"), ("p99 ms", "p99_ms", "{:.2f}"),
            ("p99.9 ms", "p999_ms", "{:.2f}"), ("broker cores busy", "broker_cores", "{:.2f}"),
            ("broker µs CPU/request", "broker_us", "{:.1f}"), ("load generator cores busy", "client_cores", "{:.2f}"),
            ("load generator µs CPU/request", "client_us", "{:.1f}"),
            ("broker system µs CPU/request (the kernel's)", "broker_system_us", "{:.1f}")]
    variant = "variant" in many
    lines = [f"| {many['workload']} | Kafka | klog | klog/Kafka |" + (" klog variant | variant/Kafka |" if variant
                                                                      else ""),
             "|---|---|---|---|" + ("---|---|" if variant else "")]
    for label, key, fmt in keys:
        if key not in many["kafka"] or key not in many["klog"]:   # results from before it was measured
            continue
        k, o = many["kafka"][key], many["klog"][key]
        line = f"| {label} | {fmt.format(k)} | {fmt.format(o)} | " + (f"{o / k:.2f}× |" if k else "- |")
        if variant:
            v = many["variant"][key]
            line += f" {fmt.format(v)} | " + (f"{v / k:.2f}× |" if k else "- |")
        lines.append(line)
    if "broker_system_us" in many["klog"]:
        lines += ["", f"The two shared cores allow klog at most **{cores_ceiling(many):.2f}×** Kafka's requests/s "
                  "((Kafka's broker + load generator µs per request) / (klog's)); with klog's broker spending only its "
                  f"kernel's share (system time, the socket and page-cache work per request) at most "
                  f"**{cores_ceiling(many, 'broker_system_us'):.2f}×**."]
        for name in ("kafka", "klog"):
            threads = sorted(many[name].get("threads_us", {}).items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{thread} {us:.1f}" for thread, us in threads if us >= 0.1)
            lines.append(f"- {name}'s µs CPU per request by thread: {shown}.")
    return "\n".join(lines)


# -- make bench: the short mode ----------------------------------------------------------------------------------

#: Short mode: one round at this share of the full volume, so that the whole test (Kafka's start-up included) stays
#: under a minute on 2 cores. A smoke run: its figures are coarse (a few 10 ms CPU ticks a case) and Kafka's are
#: still the JVM's warm-up; the figures for the docs come from the full mode.
SHORT_SCALE = 0.04
SHORT_MANY_SECONDS = 1.0


def test_request_cost_short(benchmark: Any, tmp_path: Path) -> None:
    result = benchmark.pedantic(run, args=(tmp_path, 1, SHORT_SCALE), kwargs={"many_seconds": SHORT_MANY_SECONDS},
                                rounds=1, iterations=1)
    (tmp_path / "request_cost.json").write_text(json.dumps(result, indent=1))
    print("\n" + format_table(result))
    if result["many_connections"]:
        print(format_many(result["many_connections"]))
        for broker in ("klog", "kafka"):
            assert result["many_connections"][broker]["requests_per_s"] > 0, f"{broker}: no many-connections answers"
    assert set(result["cases"]) == {c.name for c in CASES}
    for name, row in result["cases"].items():
        benchmark.extra_info[f"{name} klog/kafka"] = row["net_ratio"]
        for broker in ("klog", "kafka"):
            assert row[broker]["requests_per_s"] > 0, f"{name}: {broker} answered nothing"


# -- where klog's time goes: py-spy flame graphs of one case ------------------------------------------------------

#: py-spy's sampling rate (sidebyside.profile's, whose summary this reuses).
PROFILE_RATE_HZ = 200
#: Flame graphs checked into docs/img/ (make them with --flamegraph; describe them in docs/performance.md).
FLAMEGRAPH_CASES = {"produce/acks=1/100B": "reqcost-produce-100B.svg", "fetch/caught-up": "reqcost-fetch-caught-up.svg"}


def _pyspy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise FileNotFoundError("py-spy not found: install the bench extra (pip install -e '.[bench]')")
    return found


def _drive_for(ctx: Ctx, case: Case, seconds: float) -> int:
    """Repeat the case's requests on klog for ``seconds``; returns how many were answered."""
    frames = case.frames(ctx)
    stop, done = time.monotonic() + seconds, 0
    while time.monotonic() < stop:
        socks = connect(ctx.host, ctx.port, case.connections)
        try:
            sessions = open_sessions(socks, frames) if frames.session is not None else None
            done += drive(socks, frames, case.connections * case.window * 50, case.window, sessions)
        finally:
            for sock in socks:
                sock.close()
    return done


def flamegraphs(workdir: Path, out_dir: Path, seconds: float, log: Callable[[str], None] = print) -> str:
    """For each FLAMEGRAPH_CASES case: a py-spy --native flame graph (SVG) of klog-broker under it, and a
    summary (busy share, self and inclusive time) from a second recording in py-spy's raw format."""
    from sidebyside.profile import parse_collapsed, summarise

    pyspy = _pyspy()
    report = []
    with LAUNCHERS["klog"](workdir / "klog-profile", {**shared_properties(), "auto.create.topics.enable": "false"}) \
            as broker:
        ctx = Ctx(broker)
        prepare(ctx)
        for name, svg in FLAMEGRAPH_CASES.items():
            case = next(c for c in CASES if c.name == name)
            _drive_for(ctx, case, 1.0)  # warm-up
            outputs = {"flamegraph": out_dir / svg, "raw": workdir / (svg + ".txt")}
            summary = ""
            for fmt, out in outputs.items():
                spy = subprocess.Popen([pyspy, "record", "--native", "--pid", str(broker.pid), "--rate",
                                        str(PROFILE_RATE_HZ), "--format", fmt, "--output", str(out), "--duration",
                                        str(int(seconds))], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(0.5)  # py-spy attaches
                done = _drive_for(ctx, case, seconds)
                _, err = spy.communicate(timeout=seconds + ANSWER_TIMEOUT_S)
                if spy.returncode != 0:
                    raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-500:]}")
                if fmt == "raw":
                    summary, _top = summarise(parse_collapsed(out), seconds)
                log(f"{name}: {done} requests in {seconds:.0f} s, {fmt} -> {out}")
            report.append(f"### {name}\n\n{summary}")
    return "\n".join(report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="share of each case's request count")
    parser.add_argument("--short", action="store_true", help=f"one round at scale {SHORT_SCALE}")
    parser.add_argument("--only", default="", help="only the cases whose name contains this")
    parser.add_argument("--many-seconds", type=float, default=None,
                        help=f"length of each many-connections run (default {MANY_SECONDS}, {SHORT_MANY_SECONDS} "
                             "with --short; 0 skips it)")
    parser.add_argument("--connections", type=int, default=MANY_CONNECTIONS)
    parser.add_argument("--out", type=Path, default=None, help=f"JSON results (default {RESULTS}; none if --short)")
    parser.add_argument("--docs", type=Path, nargs="?", const=DOCS, default=None, metavar="MD",
                        help=f"only rewrite the tables of MD (default {DOCS}) from --out's JSON")
    parser.add_argument("--flamegraph", type=Path, default=None, metavar="DIR",
                        help="instead: profile klog under FLAMEGRAPH_CASES with py-spy, SVGs into DIR (docs/img)")
    parser.add_argument("--profile-seconds", type=float, default=10.0)
    parser.add_argument("--klog-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for klog's broker only (repeatable), e.g. klog.fetch.native.enable=false")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of a third broker, klog with it, measured in the same rounds (repeatable), "
                             "e.g. klog.network.native.front.enable=true")
    args = parser.parse_args(argv)
    KLOG_CONFIG.update(item.split("=", 1) for item in args.klog_config)
    VARIANT_CONFIG.update(item.split("=", 1) for item in args.variant)
    if args.docs is not None:
        write_docs(json.loads((args.out or RESULTS).read_text()), args.docs)
        return 0
    if args.flamegraph is not None:
        with tempfile.TemporaryDirectory(prefix="reqcost-") as work:
            print(flamegraphs(Path(work), args.flamegraph, args.profile_seconds, lambda m: print(m, flush=True)))
        return 0
    rounds, scale = (1, SHORT_SCALE) if args.short else (args.rounds, args.scale)
    many_seconds = args.many_seconds if args.many_seconds is not None else \
        (SHORT_MANY_SECONDS if args.short else MANY_SECONDS)
    with tempfile.TemporaryDirectory(prefix="reqcost-") as work:
        result = run(Path(work), rounds, scale, args.only, lambda line: print(line, flush=True),
                     many_seconds=many_seconds, many_connections=args.connections)
    print(format_table(result))
    if result["many_connections"]:
        print(format_many(result["many_connections"]))
    out = args.out or (None if args.short else RESULTS)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
