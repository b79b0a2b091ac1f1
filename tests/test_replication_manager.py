"""The replica manager on real partition logs, without sockets: images in (as the metadata publisher hands them
over), leadership, high watermarks and acks=all completions out. The replica fetch in between is the leader's
``follower_fetch`` verdict, a read up to the log end and the follower's ``append_as_follower``, as the fetcher
and the Fetch handler do it over the wire (``tests/test_replication_cluster.py`` runs that part)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from klog.broker.config import BrokerConfig
from klog.broker.partitions import PartitionManager
from klog.broker.replication.fetcher import ReplicaFetcher
from klog.broker.replication.follower import Action, ActionKind, FetchPosition
from klog.broker.replication.manager import ReplicaManager
from klog.broker.replication.selector import RACK_AWARE_REPLICA_SELECTOR
from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, MetadataImage
from klog.metadata.records import record
from klog.protocol import Struct
from klog.protocol.errors import ErrorCode, KafkaError
from klog.records import decode_batches, encode_batch

TOPIC_ID = uuid.UUID(int=7)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
NOT_ENOUGH_REPLICAS = int(ErrorCode.NOT_ENOUGH_REPLICAS)


def _image(leader: int, leader_epoch: int, isr: list[int], racks: dict[int, str] | None = None,
           replicas: tuple[int, ...] = (1, 2)) -> MetadataImage:
    records = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    records += [record("RegisterBrokerRecord", broker_id=b, incarnation_id=uuid.uuid4(), broker_epoch=10 + b,
                       end_points=[], features=[], rack=(racks or {}).get(b), fenced=False) for b in (1, 2)]
    records += [record("TopicRecord", name="t", topic_id=TOPIC_ID),
                record("PartitionRecord", partition_id=0, topic_id=TOPIC_ID, replicas=list(replicas), isr=isr,
                       leader=leader, leader_epoch=leader_epoch, partition_epoch=leader_epoch, directories=[])]
    return replay(EMPTY_IMAGE, records, 0)[0]


def _nowhere(broker_id: int) -> None:
    """No leader's address: the fetchers the replica manager makes are driven by hand, never connect."""
    return None


class Node:
    def __init__(self, root: Path, node_id: int, *, fetchers: bool = False, **config: str) -> None:
        self.config = BrokerConfig({"node.id": node_id, "log.dirs": str(root / f"n{node_id}"),
                                    "min.insync.replicas": 2, **config})
        self.partitions = PartitionManager(self.config)
        self.replicas = ReplicaManager(node_id, self.config, self.partitions, clock=lambda: 0,
                                       leader_address=_nowhere if fetchers else None)

    def publish(self, image: MetadataImage) -> None:   # what ClusterMetadata._publish does for a topic
        reg = image.topic("t").partitions[0]
        followed = {0} if reg.leader != self.config.node_id or self.replicas.still_appending(("t", 0)) else set()
        self.partitions.apply_topic("t", TOPIC_ID, {0: reg.leader_epoch}, {}, followed)
        self.replicas.on_image(image, ["t"])

    @property
    def log(self):
        return self.partitions.get("t", 0)


def _replicate(leader: Node, follower: Node) -> None:
    """One replica fetch of partition 0 from ``leader`` into ``follower``."""
    fp = follower.replicas.followed[("t", 0)]
    pos = fp.state.next_request(fp.log.log_start_offset, fp.log.log_end_offset, fp.log.epochs, 0)
    assert isinstance(pos, FetchPosition), pos
    verdict = leader.replicas.follower_fetch("t", 0, follower.config.node_id, 12, pos.current_leader_epoch,
                                             pos.fetch_offset, pos.last_fetched_epoch, pos.log_start_offset)
    assert verdict.error == 0 and verdict.read, verdict
    records = b""
    if pos.fetch_offset < leader.log.log_end_offset:
        records = leader.partitions.read(leader.log, pos.fetch_offset, 1 << 20, min_one_batch=True,
                                         replica=True).to_bytes()
    if records:
        fp.log.native.append_as_follower(records)
        fp.log.refresh_epochs()
    fp.state.on_appended(verdict.high_watermark, verdict.log_start_offset, fp.log.log_end_offset)
    follower.replicas.follower_high_watermark(fp)


def _append(node: Node, value: bytes) -> int:
    return node.replicas.append("t", 0, encode_batch([{"value": value}])).last_offset


def test_the_leader_owns_the_high_watermark_and_acks_all_completes_once_the_isr_has_the_batch(tmp_path: Path
                                                                                               ) -> None:
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2)
        image = _image(leader=1, leader_epoch=0, isr=[1, 2])
        one.publish(image)
        two.publish(image)
        assert one.replicas.leader_error("t", 0) == 0 and two.replicas.leader_error("t", 0) == NOT_LEADER_OR_FOLLOWER
        assert ("t", 0) in one.replicas.leaders and ("t", 0) in two.replicas.followed

        last = _append(one, b"a")
        ack = one.replicas.wait_for_ack("t", 0, last, timeout_ms=30000)
        assert ack is not None and not ack.done()
        assert one.log.log_end_offset == 1 and one.log.high_watermark == 0   # not in the ISR yet: not visible
        _replicate(one, two)   # the follower gets the batch
        assert not ack.done() and one.log.high_watermark == 0
        _replicate(one, two)   # its next fetch says it has it: the HW moves, acks=all answers
        assert one.log.high_watermark == 1 and ack.done() and ack.result() == 0
        assert two.log.log_end_offset == 1

        # acks=all is refused before the append when the ISR is smaller than min.insync.replicas, which counts at
        # most the replication factor (2 here), as Kafka 4.x's effectiveMinIsr; the topic's value is the leader's
        assert one.replicas.check_acks_all("t", 0) == (0, None)
        one.partitions.set_topic_configs("t", {"min.insync.replicas": "3"})
        one.replicas.on_log_config("t")
        assert one.replicas.leaders[("t", 0)].min_insync_replicas == 3
        assert one.replicas.check_acks_all("t", 0) == (0, None)
        one.partitions.set_topic_configs("t", {})
        one.replicas.on_log_config("t")

        # leadership moves to node 2 (epoch 1): a produce still waiting on node 1 is answered NOT_LEADER_OR_FOLLOWER
        last = _append(one, b"b")
        waiting = one.replicas.wait_for_ack("t", 0, last, timeout_ms=30000)
        moved = _image(leader=2, leader_epoch=1, isr=[2])
        one.publish(moved)
        two.publish(moved)
        assert waiting is not None and waiting.done() and waiting.result() == NOT_LEADER_OR_FOLLOWER
        assert one.replicas.leader_error("t", 0) == NOT_LEADER_OR_FOLLOWER and two.replicas.leader_error("t", 0) == 0
        assert two.replicas.check_acks_all("t", 0)[0] == NOT_ENOUGH_REPLICAS   # its ISR is itself alone
        # the new leader's epoch starts at its log end; the old leader's unreplicated "b" is cut by the divergence
        assert two.log.leader_epoch_entries()[-1] == (1, 1)
        fp = one.replicas.followed[("t", 0)]
        pos = fp.state.next_request(fp.log.log_start_offset, fp.log.log_end_offset, fp.log.epochs, 0)
        verdict = two.replicas.follower_fetch("t", 0, 1, 11, pos.current_leader_epoch, pos.fetch_offset,
                                              pos.last_fetched_epoch, pos.log_start_offset)
        assert verdict.diverging_epoch is not None and (verdict.diverging_epoch.epoch,
                                                        verdict.diverging_epoch.end_offset) == (0, 1)
        await _stop(one, two)

    asyncio.run(run())


def _one_record_replicated(tmp_path: Path, leader: int) -> tuple[Node, Node]:
    """Nodes 1 and 2 in epoch 0 of ``t``-0 led by ``leader``, one record appended there and replicated (high
    watermark 1)."""
    one, two = Node(tmp_path, 1), Node(tmp_path, 2)
    image = _image(leader=leader, leader_epoch=0, isr=[1, 2])
    one.publish(image)
    two.publish(image)
    led, following = (one, two) if leader == 1 else (two, one)
    _append(led, b"a")
    _replicate(led, following)
    _replicate(led, following)
    assert led.log.high_watermark == 1
    return one, two


def test_a_reassignment_to_the_leader_alone_completes_what_waited_for_the_followers(tmp_path: Path) -> None:
    """An acks=all produce and a DeleteRecords wait for node 2 (stopped, still in the ISR) when a reassignment
    leaves node 1 the only replica: its high watermark goes to the log end, so the batch is committed and the
    produce succeeds, as in Kafka, and DeleteRecords has its low watermark (node 1's log start). They were answered
    NOT_LEADER_OR_FOLLOWER: a producer told so resends a batch the log keeps (a duplicate)."""
    async def run() -> None:
        one, two = _one_record_replicated(tmp_path, leader=1)
        code, start, deleted = one.replicas.delete_records("t", 0, 1)
        assert (code, start) == (0, 1) and deleted is not None and not deleted.done()   # node 2's log start is 0
        last = _append(one, b"b")
        ack = one.replicas.wait_for_ack("t", 0, last, timeout_ms=30000)
        assert ack is not None and not ack.done() and one.log.high_watermark == 1
        one.publish(_image(leader=1, leader_epoch=1, isr=[1], replicas=(1,)))   # node 2 reassigned away
        assert one.log.high_watermark == 2
        assert ack.done() and ack.result() == 0
        assert deleted.done() and deleted.result() == 1
        assert one.replicas.leader_error("t", 0) == 0 and one.replicas.check_acks_all("t", 0) == (0, None)
        await _stop(one, two)

    asyncio.run(run())


def test_a_reassignment_adding_a_replica_to_a_one_replica_partition_keeps_its_high_watermark(tmp_path: Path) -> None:
    """A one-replica partition's high watermark is its log end (the ISR is its leader alone). A reassignment adding a
    replica keeps it there, as Kafka's: the new replica joins the ISR only once caught up. It was set back to the log
    start (the rule for a replicated partition first seen since the broker started, whose high watermark is not
    known): consumers saw it move back until the new replica caught up."""
    async def run() -> None:
        one = Node(tmp_path, 1)
        one.publish(_image(leader=1, leader_epoch=0, isr=[1], replicas=(1,)))
        _append(one, b"a")
        _append(one, b"b")
        assert one.log.high_watermark == 2
        one.publish(_image(leader=1, leader_epoch=1, isr=[1], replicas=(1, 2)))   # node 2 being added
        assert one.log.high_watermark == 2
        await _stop(one)

    asyncio.run(run())


def test_an_acks_all_wait_begun_after_leadership_moved_is_answered_not_leader_never_acknowledged(tmp_path: Path
                                                                                                  ) -> None:
    """A batch appended while this broker still led, whose acks=all wait starts only after metadata moved the
    leadership (a broker resumed from a pause works through its backlog before its new metadata): the new leader
    never had the batch, so the produce (or coordinator write) is answered NOT_LEADER_OR_FOLLOWER, never NONE."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2)
        image = _image(leader=1, leader_epoch=0, isr=[1, 2])
        one.publish(image)
        two.publish(image)
        last = _append(one, b"a")
        moved = _image(leader=2, leader_epoch=1, isr=[2])
        one.publish(moved)
        two.publish(moved)
        ack = one.replicas.wait_for_ack("t", 0, last, timeout_ms=30000)
        assert ack is not None and ack.done() and ack.result() == NOT_LEADER_OR_FOLLOWER
        await _stop(one, two)

    asyncio.run(run())


def _batches(node: Node) -> list[tuple[int, int, bytes | None]]:
    """(offset, leader epoch, value) of every record in ``node``'s log."""
    data = node.partitions.read(node.log, node.log.log_start_offset, 1 << 20, min_one_batch=True,
                                replica=True).to_bytes()
    return [(r.offset, b.partition_leader_epoch, None if r.value is None else bytes(r.value))
            for b in decode_batches(data) for r in b.records]


def test_a_broker_that_lost_the_leadership_refuses_an_append_that_would_diverge_inside_the_new_epoch(
        tmp_path: Path) -> None:
    """Node 2 led epoch 0 and checked a produce, then awaited (the transaction coordinator's verification of a
    transaction's first batch on the partition). Meanwhile node 1 became the leader in epoch 1 and node 2, its
    follower now, fetched node 1's first batch of epoch 1. The append after the await is refused
    NOT_LEADER_OR_FOLLOWER (Kafka's appendRecordsToLeader). Before, node 2 appended it stamped with the partition's
    epoch in the image, 1, at its log end, where node 1 then appended another batch of epoch 1: node 2's next fetch
    (last epoch 1, from its log end) found no divergence, and the two replicas disagreed below the high watermark
    for good (the transactional fault run's replica_divergence at offsets 378-379)."""
    async def run() -> None:
        one, two = _one_record_replicated(tmp_path, leader=2)
        moved = _image(leader=1, leader_epoch=1, isr=[1, 2])
        one.publish(moved)
        two.publish(moved)
        _append(one, b"b")
        _replicate(one, two)   # node 2 has epoch 1 now
        refused = None
        try:
            _append(two, b"checked while leading, appended after the await")
        except KafkaError as exc:
            refused = exc.code
        _append(one, b"c")
        _replicate(one, two)   # node 2 fetches from its log end in the epoch it last has
        _replicate(one, two)
        assert one.log.high_watermark == 3
        assert _batches(two) == _batches(one) == [(0, 0, b"a"), (1, 1, b"b"), (2, 1, b"c")]
        assert refused == NOT_LEADER_OR_FOLLOWER
        # acks=all is refused before the append too when the ISR is under min.insync.replicas
        one.publish(replay(moved, [record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC_ID, isr=[1])],
                           1)[0])
        with pytest.raises(KafkaError) as under:
            one.replicas.append("t", 0, encode_batch([{"value": b"acks=all"}]), required_acks=-1)
        assert under.value.code == NOT_ENOUGH_REPLICAS and one.log.log_end_offset == 3
        await _stop(one, two)

    asyncio.run(run())


def test_appends_move_the_high_watermark_only_through_the_replica_manager_its_owner(tmp_path: Path) -> None:
    """The log layer never moves a high watermark: an append through the replica manager does, to the log end for a
    partition with one replica (its ISR is this broker alone), and not at all for a replicated one whose follower
    has not fetched it."""
    async def run() -> None:
        alone = Node(tmp_path, 1)
        alone.publish(_image(leader=1, leader_epoch=0, isr=[1], replicas=(1,)))
        assert ("t", 0) not in alone.replicas.leaders
        alone.partitions.append("t", 0, encode_batch([{"value": b"log layer"}]))
        assert alone.log.log_end_offset == 1 and alone.log.high_watermark == 0
        _append(alone, b"owner")
        assert alone.log.log_end_offset == 2 and alone.log.high_watermark == 2

        replicated = Node(tmp_path / "replicated", 1)
        replicated.publish(_image(leader=1, leader_epoch=0, isr=[1, 2]))
        _append(replicated, b"waits for the follower")
        assert replicated.log.log_end_offset == 1 and replicated.log.high_watermark == 0
        await _stop(alone, replicated)

    asyncio.run(run())


def test_the_leadership_a_replica_fetch_was_judged_under_changes_with_either_epoch_and_ends_with_leading(
        tmp_path: Path) -> None:
    """A replica's fetch waiting for data is judged again after the wait only if this changed (the Fetch handler
    keeps it per partition): a new ISR (partition epoch), a new leader epoch, or no longer leading."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2)
        one.publish(_image(leader=1, leader_epoch=0, isr=[1, 2]))
        first = one.replicas.leadership("t", 0)
        assert first is not None and two.replicas.leadership("t", 0) is None
        one.publish(_image(leader=1, leader_epoch=0, isr=[1, 2]))
        assert one.replicas.leadership("t", 0) == first
        isr = replay(_image(leader=1, leader_epoch=0, isr=[1, 2]), [record(
            "PartitionChangeRecord", partition_id=0, topic_id=TOPIC_ID, isr=[1])], 1)[0]
        one.publish(isr)
        shrunk = one.replicas.leadership("t", 0)
        assert shrunk is not None and shrunk != first
        one.publish(_image(leader=1, leader_epoch=1, isr=[1, 2]))
        assert one.replicas.leadership("t", 0) not in (None, first, shrunk)
        one.publish(_image(leader=2, leader_epoch=2, isr=[2]))
        assert one.replicas.leadership("t", 0) is None
        await _stop(one, two)

    asyncio.run(run())


def test_an_append_wakes_the_followers_fetches_and_consumers_wait_for_the_high_watermark(tmp_path: Path) -> None:
    """A consumer reads below the high watermark: an append to a replicated partition gives it nothing to read, so
    only the follower's long-polling fetch is answered; the consumer's is answered when the watermark moves."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2)
        image = _image(leader=1, leader_epoch=0, isr=[1, 2])
        one.publish(image)
        two.publish(image)
        consumer = asyncio.ensure_future(one.partitions.wait_for_append([("t", 0)], 30))
        follower = asyncio.ensure_future(one.partitions.wait_for_append([("t", 0)], 30, replica=True))
        await asyncio.sleep(0.05)
        assert not consumer.done() and not follower.done()
        _append(one, b"a")
        await asyncio.sleep(0.05)
        assert follower.done() and not consumer.done() and one.log.high_watermark == 0
        _replicate(one, two)   # the follower gets the batch
        _replicate(one, two)   # and says so: the high watermark moves
        await asyncio.sleep(0.05)
        assert one.log.high_watermark == 1 and consumer.done()
        await _stop(one, two)

    asyncio.run(run())


def test_a_long_poll_expires_at_its_timeout_and_an_expired_or_cancelled_one_leaves_no_waiter(tmp_path: Path) -> None:
    """wait_for_append returns at its timeout with nothing appended; a waiter that expired, or whose request went
    away (its task cancelled: the connection closed), is no longer registered, so a later append wakes nothing
    stale and the registries do not grow with the long polls a broker has answered."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2)
        image = _image(leader=1, leader_epoch=0, isr=[1])
        one.publish(image)
        two.publish(image)
        started = time.monotonic()
        await one.partitions.wait_for_append([("t", 0)], 0.05)
        assert time.monotonic() - started >= 0.05
        gone = asyncio.ensure_future(one.partitions.wait_for_append([("t", 0)], 30, replica=True))
        await asyncio.sleep(0.01)
        assert one.partitions._replica_waiters
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert not one.partitions._consumer_waiters and not one.partitions._replica_waiters
        await _stop(one, two)

    asyncio.run(run())


class _HeldAppend:
    """A real log whose follower append or truncation waits (on the fetcher's worker thread) until ``release``."""

    def __init__(self, real: Any, release: threading.Event) -> None:
        self.real, self.release = real, release

    def append_as_follower(self, records: Any) -> Any:
        assert self.release.wait(30)
        return self.real.append_as_follower(records)

    def truncate_to(self, offset: int) -> Any:
        assert self.release.wait(30)
        return self.real.truncate_to(offset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _follower_with_a_held_fetcher(tmp_path: Path, replicated: list[bytes]
                                  ) -> tuple[Node, Node, threading.Event, ReplicaFetcher, Any]:
    """Node 1 leads (epoch 0) with ``replicated`` on both nodes; node 2's fetcher from node 1 follows the
    partition through a log whose appends and truncations wait for the returned event."""
    # node 2 appends on its fetcher's worker thread whatever the size (where the held log can wait)
    one, two = Node(tmp_path, 1), Node(tmp_path, 2, fetchers=True, **{"klog.replica.append.inline.bytes": 0})
    release = threading.Event()
    fetchers = two.replicas.fetchers
    assert fetchers is not None
    image = _image(leader=1, leader_epoch=0, isr=[1, 2])
    one.publish(image)
    two.publish(image)
    for value in replicated:
        _append(one, value)
        _replicate(one, two)
    fp = two.replicas.followed[("t", 0)]
    held = type(fp)(fp.key, fp.topic_id, type(fp.log)(_HeldAppend(two.log, release)), fp.state)
    fetcher = ReplicaFetcher(fetchers, 1, 0)
    fetcher.parts[fp.key] = held
    return one, two, release, fetcher, held


async def _stop(*nodes: Node) -> None:
    for node in nodes:
        await node.replicas.stop()
        node.partitions.close()


def test_a_follower_elected_mid_append_starts_its_epoch_after_the_batches_it_was_appending(tmp_path: Path) -> None:
    """Node 2 is appending node 1's last batch (epoch 0) on its fetcher's thread when metadata makes it the leader
    in epoch 1. As Kafka's makeLeader waits for the fetcher, epoch 1 starts after that batch: had it started at
    the log end before the append, the batch (epoch 0) would sit inside epoch 1, and a follower holding the same
    batch would be told to truncate it on every fetch and re-fetch it forever (the ISR flapping, acks=all stuck:
    a SIGTERMed leader's failover test in CI)."""
    async def run() -> None:
        one, two, release, fetcher, held = _follower_with_a_held_fetcher(tmp_path, [b"a"])
        _append(one, b"b")
        records = one.partitions.read(one.log, 1, 1 << 20, min_one_batch=True, replica=True).to_bytes()
        appending = asyncio.create_task(fetcher._append(held, records, 1, 0))
        # one loop step: the fetcher has handed the batch to its append task, which has not run yet; the metadata
        # that arrives now (node 1 is gone) must wait for that append too
        await asyncio.sleep(0)
        two.publish(_image(leader=2, leader_epoch=1, isr=[2]))
        assert two.replicas.leader_error("t", 0) == NOT_LEADER_OR_FOLLOWER   # not before the append ends
        assert ("t", 0) not in two.replicas.leaders and two.log.leader_epoch_entries() == [(0, 0)]
        release.set()
        await appending
        assert two.log.log_end_offset == 2 and two.replicas.leader_error("t", 0) == 0
        assert two.log.leader_epoch_entries() == [(0, 0), (1, 2)]
        assert two.replicas.leaders[("t", 0)].leader_epoch_start_offset == 2
        # node 1, back as a follower holding the same two batches, is not told to truncate "b"
        verdict = two.replicas.follower_fetch("t", 0, 1, 11, 1, 2, 0, 0)
        assert verdict.error == 0 and verdict.diverging_epoch is None, verdict
        await _stop(one, two)

    asyncio.run(run())


def _fetch_answer(fp: Any, error: int = 0, records: bytes = b"", high_watermark: int = 0) -> tuple[Any, Any]:
    """The positions a fetch of ``fp`` was sent with, as they are now, and a leader's FetchResponse v15 to it."""
    pos = fp.state.next_request(fp.log.log_start_offset, fp.log.log_end_offset, fp.log.epochs, 0)
    assert isinstance(pos, FetchPosition), pos
    response = Struct(error_code=0, responses=[Struct(topic_id=fp.topic_id, topic="t", partitions=[Struct(
        partition_index=0, error_code=error, high_watermark=high_watermark, log_start_offset=0,
        diverging_epoch=None, records=records)])])
    return {fp.key: (fp, pos)}, response


def test_a_follower_elected_while_its_fetcher_takes_in_an_answer_starts_its_epoch_after_that_answers_batches(
        tmp_path: Path) -> None:
    """The same through the fetcher's handling of a whole Fetch answer, whose partitions' appends run as tasks of
    their own: the partitions are claimed as the answer is read, not when their tasks first run. Claimed later,
    metadata arriving in between made node 2 the leader with epoch 1 starting before the batch it then appended
    (epoch 0), the follower loop above (a SIGTERMed leader's failover test in CI, after the appends went side
    by side)."""
    async def run() -> None:
        one, two, release, fetcher, held = _follower_with_a_held_fetcher(tmp_path, [b"a"])
        _append(one, b"b")
        records = one.partitions.read(one.log, 1, 1 << 20, min_one_batch=True, replica=True).to_bytes()
        positions, response = _fetch_answer(held, records=records, high_watermark=1)
        answers = fetcher._answer(response, positions, 15, {})
        two.publish(_image(leader=2, leader_epoch=1, isr=[2]))   # before any of that work's steps
        assert two.replicas.leader_error("t", 0) == NOT_LEADER_OR_FOLLOWER and ("t", 0) not in two.replicas.leaders
        release.set()
        await asyncio.gather(*answers)
        assert two.log.log_end_offset == 2 and two.replicas.leader_error("t", 0) == 0
        assert two.log.leader_epoch_entries() == [(0, 0), (1, 2)]
        await _stop(one, two)

    asyncio.run(run())


def test_a_small_answer_is_appended_before_the_fetcher_reads_on_and_metadata_after_it_leads_from_its_end(
        tmp_path: Path) -> None:
    """An answer of at most klog.replica.append.inline.bytes is appended on the event loop as it is read (a thread
    hop would cost the loop more), so no claim is left open for metadata to wait on."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2, fetchers=True)
        fetchers = two.replicas.fetchers
        assert fetchers is not None
        image = _image(leader=1, leader_epoch=0, isr=[1, 2])
        one.publish(image)
        two.publish(image)
        fetcher = next(iter(fetchers.fetchers.values()))   # the one from node 1 publish made (not started)
        fp = two.replicas.followed[("t", 0)]
        assert fetcher.parts[fp.key] is fp
        _append(one, b"a")
        records = one.partitions.read(one.log, 0, 1 << 20, min_one_batch=True, replica=True).to_bytes()
        positions, response = _fetch_answer(fp, records=records, high_watermark=1)
        answers = fetcher._answer(response, positions, 15, {})
        assert two.log.log_end_offset == 1 and not fetchers.appending
        two.publish(_image(leader=2, leader_epoch=1, isr=[2]))
        assert two.replicas.leader_error("t", 0) == 0 and two.log.leader_epoch_entries() == [(0, 0), (1, 1)]
        await asyncio.gather(*answers)
        # its own as the leader (ISR [2] is under min.insync.replicas: it stays), not the old leader's 1
        assert two.log.high_watermark == 0
        await _stop(one, two)

    asyncio.run(run())


def test_an_answer_to_a_fetch_sent_in_an_older_leader_epoch_is_dropped(tmp_path: Path) -> None:
    """Metadata moves the partition to epoch 1 under the same leader while a fetch sent in epoch 0 is out. The
    leader, already in epoch 1, answers it FENCED_LEADER_EPOCH; taken as an answer for epoch 1 it would stop the
    follower until a newer epoch came, which may be never. Kafka's fetcher drops it; the next fetch goes in
    epoch 1."""
    async def run() -> None:
        one, two, release, fetcher, held = _follower_with_a_held_fetcher(tmp_path, [b"a"])
        release.set()
        positions, response = _fetch_answer(held, error=int(ErrorCode.FENCED_LEADER_EPOCH))
        two.publish(_image(leader=1, leader_epoch=1, isr=[1, 2]))
        assert held.state.leader_epoch == 1
        await asyncio.gather(*fetcher._answer(response, positions, 15, {}))
        nxt = held.state.next_request(held.log.log_start_offset, held.log.log_end_offset, held.log.epochs, 0)
        assert isinstance(nxt, FetchPosition) and nxt.current_leader_epoch == 1, nxt
        # the same answer to a fetch sent in epoch 1 stops it (metadata is behind the leader's)
        positions, response = _fetch_answer(held, error=int(ErrorCode.FENCED_LEADER_EPOCH))
        await asyncio.gather(*fetcher._answer(response, positions, 15, {}))
        nxt = held.state.next_request(held.log.log_start_offset, held.log.log_end_offset, held.log.epochs, 0)
        assert isinstance(nxt, Action) and nxt.kind is ActionKind.STOP
        await _stop(one, two)

    asyncio.run(run())


def test_a_follower_elected_mid_truncation_starts_its_epoch_at_the_log_end_the_truncation_leaves(tmp_path: Path
                                                                                                   ) -> None:
    """The same for a truncation under way: were the epoch to start at the log end before it, the truncation
    would cut that start off, and the new leader would hold batches of its epoch the epoch cache does not know."""
    async def run() -> None:
        one, two, release, fetcher, held = _follower_with_a_held_fetcher(tmp_path, [b"a", b"b", b"c"])
        assert two.log.log_end_offset == 3
        truncating = asyncio.create_task(fetcher._apply(held, Action(ActionKind.TRUNCATE, offset=1)))
        await asyncio.sleep(0)
        two.publish(_image(leader=2, leader_epoch=1, isr=[2]))
        assert two.replicas.leader_error("t", 0) == NOT_LEADER_OR_FOLLOWER and ("t", 0) not in two.replicas.leaders
        release.set()
        await truncating
        assert two.log.log_end_offset == 1 and two.replicas.leader_error("t", 0) == 0
        assert two.log.leader_epoch_entries() == [(0, 0), (1, 1)]
        assert two.replicas.leaders[("t", 0)].leader_epoch_start_offset == 1
        _append(two, b"d")   # epoch 1's first batch, at offset 1: a follower at 3 in epoch 0 is told to cut to 1
        verdict = two.replicas.follower_fetch("t", 0, 1, 11, 1, 3, 0, 0)
        assert verdict.diverging_epoch is not None and (verdict.diverging_epoch.epoch,
                                                        verdict.diverging_epoch.end_offset) == (0, 1)
        await _stop(one, two)

    asyncio.run(run())


def test_a_follower_whose_log_ends_before_the_leaders_log_start_restarts_there_and_catches_up(tmp_path: Path
                                                                                                ) -> None:
    """Node 2 joins empty (log end 0) after DeleteRecords moved node 1's log start to 3: its fetch at 0 is
    OFFSET_OUT_OF_RANGE, the leader's offsets make it TRUNCATE_FULLY at 3, and its real fetcher restarts the log
    there (Kafka's truncateFullyAndStartAt). Before, it cut its log to its own start and then asked to delete
    records up to 3, past its high watermark (clamped to its log end): refused at every round, never caught up."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2, fetchers=True)
        fetchers = two.replicas.fetchers
        assert fetchers is not None
        one.publish(_image(leader=1, leader_epoch=0, isr=[1], replicas=(1,)))
        for value in (b"a", b"b", b"c", b"d", b"e"):
            _append(one, value)
        assert one.log.high_watermark == 5   # one replica: its log end
        assert one.log.delete_records_before(3) == 3
        reassigned = _image(leader=1, leader_epoch=0, isr=[1])   # node 2 added
        one.publish(reassigned)
        two.publish(reassigned)
        fp = two.replicas.followed[("t", 0)]
        assert (fp.log.log_start_offset, fp.log.log_end_offset) == (0, 0)
        pos = fp.state.next_request(fp.log.log_start_offset, fp.log.log_end_offset, fp.log.epochs, 0)
        verdict = one.replicas.follower_fetch("t", 0, 2, 12, pos.current_leader_epoch, pos.fetch_offset,
                                              pos.last_fetched_epoch, pos.log_start_offset)
        assert verdict.error == int(ErrorCode.OFFSET_OUT_OF_RANGE)
        action = fp.state.on_leader_offsets(one.log.log_start_offset, one.log.log_end_offset,
                                            fp.log.log_end_offset, fp.log.epochs)
        assert action.kind is ActionKind.TRUNCATE_FULLY and action.offset == 3
        fetcher = ReplicaFetcher(fetchers, 1, 0)
        fetcher.parts[fp.key] = fp
        await fetcher._apply(fp, action)
        assert (two.log.log_start_offset, two.log.log_end_offset, two.log.high_watermark) == (3, 3, 3)
        assert not fetchers.appending
        _replicate(one, two)   # the batches from the leader's log start on
        _replicate(one, two)
        assert (two.log.log_start_offset, two.log.log_end_offset) == (3, 5)
        assert two.log.leader_epoch_entries() == [(0, 3)] and fp.log.epochs.entries() == [(0, 3)]
        assert [b[2] for b in _batches(two)] == [b"d", b"e"]
        await _stop(one, two)

    asyncio.run(run())


def test_a_follower_restarted_at_a_leaders_log_start_inside_a_batch_takes_that_batch(tmp_path: Path) -> None:
    """DeleteRecords moved node 1's log start to 1, inside its first batch (offsets 0-2): node 2, restarted at 1,
    fetches from 1 and is sent the whole batch. Its empty log restarts at the batch's base (Kafka's follower on an
    UnexpectedAppendOffsetException), then its log start follows the leader's to 1. Before, the append was refused
    (offset 0 below the log end 1) at every round: never caught up."""
    async def run() -> None:
        one, two = Node(tmp_path, 1), Node(tmp_path, 2, fetchers=True)
        fetchers = two.replicas.fetchers
        assert fetchers is not None
        one.publish(_image(leader=1, leader_epoch=0, isr=[1], replicas=(1,)))
        one.replicas.append("t", 0, encode_batch([{"value": b"a"}, {"value": b"b"}, {"value": b"c"}]))
        assert one.log.delete_records_before(1) == 1
        reassigned = _image(leader=1, leader_epoch=0, isr=[1])
        one.publish(reassigned)
        two.publish(reassigned)
        fp = two.replicas.followed[("t", 0)]
        fetcher = ReplicaFetcher(fetchers, 1, 0)
        fetcher.parts[fp.key] = fp
        await fetcher._apply(fp, fp.state.on_leader_offsets(1, 3, 0, fp.log.epochs))
        assert (two.log.log_start_offset, two.log.log_end_offset) == (1, 1)
        pos = fp.state.next_request(fp.log.log_start_offset, fp.log.log_end_offset, fp.log.epochs, 0)
        verdict = one.replicas.follower_fetch("t", 0, 2, 12, pos.current_leader_epoch, pos.fetch_offset,
                                              pos.last_fetched_epoch, pos.log_start_offset)
        assert verdict.error == 0 and pos.fetch_offset == 1
        records = one.partitions.read(one.log, 1, 1 << 20, min_one_batch=True, replica=True).to_bytes()
        await fetcher._append(fp, records, verdict.high_watermark, verdict.log_start_offset)
        assert (two.log.log_start_offset, two.log.log_end_offset) == (1, 3)
        _replicate(one, two)   # its next fetch, from 3, is the leader's log end
        assert two.log.log_end_offset == 3
        assert _batches(two) == _batches(one) and fp.log.epochs.entries() == [(0, 0)]   # the same whole batch
        await _stop(one, two)

    asyncio.run(run())


def test_a_partition_followed_anew_while_an_append_runs_mirrors_the_epochs_that_append_left(tmp_path: Path
                                                                                            ) -> None:
    """Node 2 is appending node 1's epoch-1 batch on its fetcher's thread when metadata makes it the leader
    (deferred: the append is under way) and then a follower again in epoch 3: a new followed partition, whose log
    view mirrored the epoch cache before the append ended. Without the refresh at the append's end its next fetch
    named epoch 0 as the last fetched one and the leader told it to cut the epoch-1 batch it holds (then fetch it
    again)."""
    async def run() -> None:
        one, two, release, fetcher, held = _follower_with_a_held_fetcher(tmp_path, [b"a"])
        for node in (one, two):
            node.publish(_image(leader=1, leader_epoch=1, isr=[1, 2]))
        _append(one, b"b")   # epoch 1's batch, at offset 1
        records = one.partitions.read(one.log, 1, 1 << 20, min_one_batch=True, replica=True).to_bytes()
        appending = asyncio.create_task(fetcher._append(held, records, 2, 0))
        await asyncio.sleep(0)
        two.publish(_image(leader=2, leader_epoch=2, isr=[1, 2]))   # leads once the append ends
        two.publish(_image(leader=1, leader_epoch=3, isr=[1, 2]))   # follower again: followed anew
        one.publish(_image(leader=1, leader_epoch=3, isr=[1, 2]))
        followed = two.replicas.followed[("t", 0)]
        assert followed is not held and followed.log.epochs.entries() == [(0, 0)]
        release.set()
        await appending
        assert two.log.leader_epoch_entries() == [(0, 0), (1, 1)] and two.log.log_end_offset == 2
        assert followed.log.epochs.entries() == [(0, 0), (1, 1)]
        pos = followed.state.next_request(followed.log.log_start_offset, followed.log.log_end_offset,
                                          followed.log.epochs, 0)
        assert isinstance(pos, FetchPosition) and pos.last_fetched_epoch == 1, pos
        verdict = one.replicas.follower_fetch("t", 0, 2, 12, pos.current_leader_epoch, pos.fetch_offset,
                                              pos.last_fetched_epoch, pos.log_start_offset)
        assert verdict.error == 0 and verdict.diverging_epoch is None, verdict
        await _stop(one, two)

    asyncio.run(run())


def test_only_a_leader_with_a_replica_selector_sends_a_consumer_to_the_in_sync_follower_of_its_rack(
        tmp_path: Path) -> None:
    image = _image(1, 0, [1, 2], racks={1: "a", 2: "b"})
    for selector, redirected in ((None, -1), (RACK_AWARE_REPLICA_SELECTOR, 2)):
        config = {"replica.selector.class": selector} if selector else {}
        leader, follower = Node(tmp_path / f"{redirected}", 1, **config), Node(tmp_path / f"{redirected}", 2)
        leader.publish(image)
        follower.publish(image)
        _append(leader, b"x")
        _replicate(leader, follower)
        _replicate(leader, follower)   # the leader knows the follower's log end (1) from this fetch's offset
        assert leader.replicas.preferred_read_replica("t", 0, "b", 1, "a") == redirected
        assert leader.replicas.preferred_read_replica("t", 0, "b", 2, "a") == -1   # past the follower's log end
        assert leader.replicas.preferred_read_replica("t", 0, "a", 1, "a") == -1   # the leader's own rack
        assert leader.replicas.preferred_read_replica("t", 0, None, 1, "a") == -1
        # a follower never redirects
        assert follower.replicas.preferred_read_replica("t", 0, "b", 1, "b") == -1
