"""Group coordinator: klog-broker vs Apache Kafka 4.x on this machine, same load generator, same run.

Run: ``.venv/bin/pytest benches/bench_groups.py -p benchmark -o addopts="" --benchmark-only -s``

Both brokers run as their own processes on 127.0.0.1. The load generator speaks the wire protocol directly
(klog.protocol over asyncio sockets), so it measures the coordinators, not a client library's pacing.

Measured (figures printed and stored in extra_info by ``test_groups_summary``):
- heartbeats/s: a classic group of MEMBERS members (formed with JoinGroup/SyncGroup), then Heartbeat requests
  for the members over CONNECTIONS connections with WINDOW requests in flight each, for HEARTBEAT_SECONDS;
- classic rebalance of MEMBERS members: a stable group, a new member joins and every member rejoins at once
  (as after a heartbeat answered REBALANCE_IN_PROGRESS); time until all MEMBERS + 1 SyncGroup answers arrive;
- KIP-848 rebalance of MEMBERS members: members join with ConsumerGroupHeartbeat and heartbeat back to back until
  every member is stable on the group's final epoch owning its share of PARTITIONS partitions.

- the native session tracker (klog._native.SessionTracker) against the same algorithm in pure Python (heapq):
  HEARTBEATS deadline extensions over TRACKED_MEMBERS members with expiry polling.

Targets, checked in ``test_groups_summary`` (ratios to baselines from the same run, never absolute times):
- native tracker >= 2x the pure-Python heap;
- klog heartbeats/s >= 1.0x Kafka's;
- klog classic and KIP-848 rebalance times <= 1.0x Kafka's.
"""

from __future__ import annotations

import asyncio
import statistics
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import Struct, decode_response, encode_request
from klog.protocol.errors import ErrorCode as E
from klog.testing.kafka import apache_kafka
from klog.testing.kafka_tools import kafka_libs_dir
from klog.testing.process import BrokerProcess

MEMBERS = 100
PARTITIONS = 200
CONNECTIONS = 8
WINDOW = 16
HEARTBEAT_SECONDS = 5.0
SESSION_MS = 45000
SHARED = {"num.partitions": 1, "offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0,
          "auto.create.topics.enable": "true", "group.max.size": 10000}
FIGURES: dict[str, float] = {}
LIBS = kafka_libs_dir(Path(__file__).resolve().parent)


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", len(partitions))
    return out + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


class Conn:
    """One connection; requests may be pipelined (answers come back in order)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0
        self.pending: list[tuple[int, int, int]] = []

    @classmethod
    async def open(cls, bootstrap: str) -> Conn:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    def send(self, api_key: int, version: int, body: Any) -> None:
        self.correlation += 1
        self.writer.write(encode_request(api_key, version, self.correlation, "bench", body))
        self.pending.append((api_key, version, self.correlation))

    async def receive(self) -> Struct:
        api_key, version, correlation = self.pending.pop(0)
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        cid, response = decode_response(api_key, version, await self.reader.readexactly(size))
        assert cid == correlation
        return response

    async def call(self, api_key: int, version: int, body: Any) -> Struct:
        self.send(api_key, version, body)
        await self.writer.drain()
        return await self.receive()

    def close(self) -> None:
        self.writer.close()


class Target:
    def __init__(self, name: str, bootstrap: str) -> None:
        self.name, self.bootstrap = name, bootstrap


@pytest.fixture(scope="module")
def klog_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with BrokerProcess(tmp_path_factory.mktemp("klog"), SHARED) as broker:
        yield Target("klog", broker.bootstrap_servers)


@pytest.fixture(scope="module")
def kafka_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    if LIBS is None:
        pytest.skip("Kafka jars missing: run tools/install-peers.sh")
    with apache_kafka(tmp_path_factory.mktemp("kafka"), config=SHARED, libs=LIBS) as bootstrap:
        yield Target("kafka", bootstrap)


@pytest.fixture(params=["klog", "kafka"])
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(f"{request.param}_target")


async def ready(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Topic created and the group's coordinator loaded (Kafka creates __consumer_offsets on demand)."""
    c = await Conn.open(bootstrap)
    try:
        await c.call(19, 4, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                                         "assignments": [], "configs": []}], "timeout_ms": 30000,
                             "validate_only": False})
        deadline = time.monotonic() + 60
        while True:
            r = await c.call(10, 3, {"key": group, "key_type": 0})
            if r.error_code == 0:
                return
            assert time.monotonic() < deadline, f"no coordinator for {group}: {r.error_code}"
            await asyncio.sleep(0.2)
    finally:
        c.close()


def join_body(group: str, member_id: str, topic: str) -> dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 60000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic)}]}


async def sync_all(conns: list[Conn], joins: list[Struct], group: str, topic: str) -> list[Struct]:
    """Every member syncs the generation of its join answer; the leader assigns round-robin."""
    for j in joins:
        assert j.error_code == 0, j
    leader = next(j for j in joins if j.member_id == j.leader)
    member_ids = [m.member_id for m in leader.members]
    plan = {mid: assignment(topic, [p for p in range(PARTITIONS) if p % len(member_ids) == i])
            for i, mid in enumerate(member_ids)}

    async def sync(c: Conn, j: Struct) -> Struct:
        body = {"group_id": group, "generation_id": j.generation_id, "member_id": j.member_id,
                "group_instance_id": None,
                "assignments": [{"member_id": m, "assignment": a} for m, a in plan.items()]
                if j.member_id == j.leader else []}
        return await c.call(14, 3, body)

    return list(await asyncio.gather(*(sync(c, j) for c, j in zip(conns, joins))))


async def form_group(bootstrap: str, group: str, topic: str, n: int) -> tuple[list[Conn], list[str], int]:
    """n members form a stable group the way consumers do: join (rejoining on MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS, ...), sync, then heartbeat until every member synced the same generation."""
    conns = [await Conn.open(bootstrap) for _ in range(n)]
    ids = [""] * n
    synced: dict[int, int] = {}
    done = asyncio.Event()

    def complete() -> bool:
        return len(synced) == n and len(set(synced.values())) == 1

    async def member(i: int) -> None:
        c = conns[i]
        while not done.is_set():
            j = await c.call(11, 5, join_body(group, ids[i], topic))
            if j.error_code == E.MEMBER_ID_REQUIRED:
                ids[i] = j.member_id
                continue
            if j.error_code == E.UNKNOWN_MEMBER_ID:
                ids[i] = ""
                continue
            if j.error_code != 0:
                await asyncio.sleep(0.01)
                continue
            ids[i] = j.member_id
            plan = []
            if j.member_id == j.leader:
                members = [m.member_id for m in j.members]
                plan = [{"member_id": m, "assignment": assignment(
                    topic, [p for p in range(PARTITIONS) if p % len(members) == k])} for k, m in enumerate(members)]
            r = await c.call(14, 3, {"group_id": group, "generation_id": j.generation_id, "member_id": ids[i],
                                     "group_instance_id": None, "assignments": plan})
            if r.error_code != 0:
                synced.pop(i, None)
                continue
            synced[i] = j.generation_id
            while not done.is_set():
                if complete():
                    done.set()
                    return
                await asyncio.sleep(0.05)
                h = await c.call(12, 3, {"group_id": group, "generation_id": j.generation_id, "member_id": ids[i],
                                         "group_instance_id": None})
                if h.error_code != 0:
                    synced.pop(i, None)
                    break

    await asyncio.wait_for(asyncio.gather(*(member(i) for i in range(n))), 120)
    return conns, ids, next(iter(synced.values()))


# -- heartbeats/s ---------------------------------------------------------------------------------------------------


async def heartbeat_rate(target: Target) -> float:
    group, topic = f"hb-{uuid.uuid4().hex[:6]}", f"hbt-{uuid.uuid4().hex[:6]}"
    await ready(target.bootstrap, group, topic, PARTITIONS)
    conns, ids, generation = await form_group(target.bootstrap, group, topic, MEMBERS)
    # Pre-encoded Heartbeat v3 requests (the correlation id is patched in place): the load generator shares the
    # machine with the broker, so it must cost far less per request than the broker does.
    frames = [bytearray(encode_request(12, 3, 0, "bench", {"group_id": group, "generation_id": generation,
                                                           "member_id": mid, "group_instance_id": None}))
              for mid in ids]
    host, port = target.bootstrap.rsplit(":", 1)
    done = 0
    stop_at = time.monotonic() + HEARTBEAT_SECONDS

    async def pump(offset: int) -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, int(port))
        sent = received = 0

        def send() -> None:
            nonlocal sent
            frame = frames[(offset + sent * CONNECTIONS) % MEMBERS]
            struct.pack_into(">i", frame, 8, sent)  # size(4) api_key(2) version(2) correlation(4)
            writer.write(frame)
            sent += 1

        for _ in range(WINDOW):
            send()
        while True:
            head = await reader.readexactly(4)
            body = await reader.readexactly(struct.unpack(">i", head)[0])
            # Heartbeat v3 response: correlation int32, throttle int32, error int16.
            correlation, _, error = struct.unpack_from(">iih", body)
            assert correlation == received and error == 0, (correlation, received, error)
            received += 1
            done += 1
            if time.monotonic() < stop_at:
                send()
            elif received == sent:
                break
        writer.close()

    started = time.monotonic()
    await asyncio.gather(*(pump(k) for k in range(CONNECTIONS)))
    elapsed = time.monotonic() - started
    for c in conns:
        c.close()
    return done / elapsed


def test_heartbeat_throughput(benchmark: Any, target: Target) -> None:
    benchmark.group = "group-heartbeats"
    rates: list[float] = []
    benchmark.pedantic(lambda: rates.append(asyncio.run(heartbeat_rate(target))), rounds=2, iterations=1)
    FIGURES[f"{target.name} heartbeats/s"] = statistics.median(rates)


# -- classic rebalance -----------------------------------------------------------------------------------------------


async def classic_rebalance_seconds(target: Target) -> float:
    group, topic = f"rb-{uuid.uuid4().hex[:6]}", f"rbt-{uuid.uuid4().hex[:6]}"
    await ready(target.bootstrap, group, topic, PARTITIONS)
    conns, ids, generation = await form_group(target.bootstrap, group, topic, MEMBERS)
    newcomer, admin = await Conn.open(target.bootstrap), await Conn.open(target.bootstrap)
    r = await newcomer.call(11, 5, join_body(group, "", topic))
    assert r.error_code == E.MEMBER_ID_REQUIRED
    started = time.perf_counter()
    # The newcomer's join starts the rebalance; members rejoin once the group is rebalancing (in real clients a
    # heartbeat answered REBALANCE_IN_PROGRESS tells them; a join before that would just be answered at once).
    newcomer_join = asyncio.ensure_future(newcomer.call(11, 5, join_body(group, r.member_id, topic)))
    while (await admin.call(15, 4, {"groups": [group], "include_authorized_operations": False})
           ).groups[0].group_state != "PreparingRebalance":
        pass
    joins = await asyncio.gather(*(c.call(11, 5, join_body(group, mid, topic)) for c, mid in zip(conns, ids)))
    joins.append(await newcomer_join)
    syncs = await sync_all(conns + [newcomer], joins, group, topic)
    elapsed = time.perf_counter() - started
    assert all(s.error_code == 0 for s in syncs), [s.error_code for s in syncs]
    admin.close()
    assert {j.generation_id for j in joins} == {generation + 1}
    for c in conns + [newcomer]:
        c.close()
    return elapsed


def test_classic_rebalance_of_100_members(benchmark: Any, target: Target) -> None:
    benchmark.group = "group-classic-rebalance"
    times: list[float] = []
    benchmark.pedantic(lambda: times.append(asyncio.run(classic_rebalance_seconds(target))), rounds=5,
                       iterations=1)
    FIGURES[f"{target.name} classic rebalance 100 ms"] = statistics.median(times) * 1000


# -- KIP-848 rebalance -----------------------------------------------------------------------------------------------


async def kip848_seconds(target: Target) -> float:
    group, topic = f"k8-{uuid.uuid4().hex[:6]}", f"k8t-{uuid.uuid4().hex[:6]}"
    await ready(target.bootstrap, group, topic, PARTITIONS)
    conns = [await Conn.open(target.bootstrap) for _ in range(MEMBERS)]
    state = [{"id": str(uuid.uuid4()), "epoch": 0, "owned": []} for _ in range(MEMBERS)]

    async def beat(c: Conn, s: dict[str, Any]) -> Struct:
        body: dict[str, Any] = {"group_id": group, "member_id": s["id"], "member_epoch": s["epoch"],
                                "instance_id": None, "rack_id": None, "rebalance_timeout_ms": -1,
                                "subscribed_topic_names": None, "server_assignor": None,
                                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in s["owned"]]}
        if s["epoch"] == 0:
            body.update(rebalance_timeout_ms=60000, subscribed_topic_names=[topic], server_assignor="uniform",
                        topic_partitions=[])
        r = await c.call(68, 1, body)
        while r.error_code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
            await asyncio.sleep(0.1)  # Kafka loads a coordinator partition lazily
            r = await c.call(68, 1, body)
        assert r.error_code == 0, (r.error_code, r.error_message)
        s["epoch"] = r.member_epoch
        if r.assignment is not None:
            s["owned"] = [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions]
        return r

    def settled() -> bool:
        epochs = {s["epoch"] for s in state}
        owned = sorted(p for s in state for _, ps in s["owned"] for p in ps)
        return len(epochs) == 1 and owned == list(range(PARTITIONS))

    started = time.perf_counter()
    await asyncio.gather(*(beat(c, s) for c, s in zip(conns, state)))
    deadline = time.monotonic() + 90
    while not settled():
        epochs = sorted({s["epoch"] for s in state})
        owned = sum(len(ps) for s in state for _, ps in s["owned"])
        assert time.monotonic() < deadline, f"KIP-848 group did not settle: epochs {epochs}, {owned} owned"
        await asyncio.gather(*(beat(c, s) for c, s in zip(conns, state)))
    # One more round: every member confirms the final epoch (a settled view may still await acknowledgements).
    await asyncio.gather(*(beat(c, s) for c, s in zip(conns, state)))
    elapsed = time.perf_counter() - started
    assert settled()
    for c, s in zip(conns, state):
        body = {"group_id": group, "member_id": s["id"], "member_epoch": -1, "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "server_assignor": None,
                "topic_partitions": None}
        await c.call(68, 1, body)
        c.close()
    return elapsed


def test_kip848_group_of_100_members_settles(benchmark: Any, target: Target) -> None:
    benchmark.group = "group-kip848-rebalance"
    times: list[float] = []
    benchmark.pedantic(lambda: times.append(asyncio.run(kip848_seconds(target))), rounds=2, iterations=1)
    FIGURES[f"{target.name} kip848 settle 100 ms"] = statistics.median(times) * 1000


# -- the native session tracker vs a Python heap ------------------------------------------------------------------

TRACKED_MEMBERS = 10_000
HEARTBEATS = 500_000


class PythonTracker:
    """The same lazy-extension deadline heap in pure Python (heapq + dict): the baseline."""

    def __init__(self) -> None:
        import heapq

        self.heapq = heapq
        self.entries: dict[int, list[int]] = {}  # key -> [deadline, queued]
        self.heap: list[tuple[int, int]] = []

    def schedule(self, key: int, deadline: int) -> None:
        entry = self.entries.get(key)
        if entry is not None and deadline >= entry[1]:
            entry[0] = deadline
            return
        self.entries[key] = [deadline, deadline]
        self.heapq.heappush(self.heap, (deadline, key))

    def expired(self, now: int) -> list[int]:
        out = []
        while self.heap and self.heap[0][0] <= now:
            queued, key = self.heapq.heappop(self.heap)
            entry = self.entries.get(key)
            if entry is None or entry[1] != queued:
                continue
            if entry[0] == queued:
                del self.entries[key]
                out.append(key)
            else:
                entry[1] = entry[0]
                self.heapq.heappush(self.heap, (entry[0], key))
        return out


def session_workload(tracker: Any) -> float:
    """TRACKED_MEMBERS members with a 10 s session heartbeat round-robin; expiry polled every 100 beats."""
    started = time.perf_counter()
    schedule, expired = tracker.schedule, tracker.expired
    now = 0
    for i in range(HEARTBEATS):
        now += 1
        schedule(i % TRACKED_MEMBERS, now + 10_000)
        if i % 100 == 0:
            expired(now)
    return time.perf_counter() - started


@pytest.mark.parametrize("impl", ["native", "python"])
def test_session_tracker_heartbeats(benchmark: Any, impl: str) -> None:
    from klog._native import SessionTracker

    benchmark.group = "group-session-tracker"
    times: list[float] = []
    benchmark.pedantic(lambda: times.append(session_workload(SessionTracker() if impl == "native"
                                                              else PythonTracker())), rounds=3, iterations=1)
    FIGURES[f"{impl} tracker heartbeats/s"] = HEARTBEATS / statistics.median(times)


def test_groups_summary(benchmark: Any) -> None:
    benchmark.group = "group-summary"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    for key, value in sorted(FIGURES.items()):
        print(f"{key:40s} {value:14.1f}")
    benchmark.extra_info.update(FIGURES)
    ratios = {}
    if "kafka heartbeats/s" in FIGURES and "klog heartbeats/s" in FIGURES:
        ratios["heartbeats klog/kafka"] = FIGURES["klog heartbeats/s"] / FIGURES["kafka heartbeats/s"]
    for key in ("classic rebalance 100 ms", "kip848 settle 100 ms"):
        if f"kafka {key}" in FIGURES and f"klog {key}" in FIGURES:
            ratios[f"{key} klog/kafka"] = FIGURES[f"klog {key}"] / FIGURES[f"kafka {key}"]
    if "python tracker heartbeats/s" in FIGURES and "native tracker heartbeats/s" in FIGURES:
        ratios["tracker native/python"] = FIGURES["native tracker heartbeats/s"] / FIGURES["python tracker heartbeats/s"]
    for key, value in ratios.items():
        print(f"{key:40s} {value:14.2f}")
    benchmark.extra_info.update(ratios)
    assert ratios.get("tracker native/python", 2.0) >= 2.0, ratios
    assert ratios.get("heartbeats klog/kafka", 1.0) >= 1.0, ratios
    assert ratios.get("classic rebalance 100 ms klog/kafka", 1.0) <= 1.0, ratios
    assert ratios.get("kip848 settle 100 ms klog/kafka", 1.0) <= 1.0, ratios
