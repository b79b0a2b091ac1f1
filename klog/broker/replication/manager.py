"""The replica manager: the IO-facing owner of each local partition's replication state (Kafka's
``ReplicaManager``), driven by the committed metadata image.

For every partition with a replica on this broker the image says who leads; on each change
(:meth:`ReplicaManager.on_image`, called by the metadata publisher after the partition logs are opened):

- **this broker leads a replicated partition** (more than one replica): a :class:`.leader.LeaderPartition` owns
  its high watermark, serves the followers' fetches (:meth:`follower_fetch`), holds acks=all produces until the
  ISR has them (:meth:`wait_for_ack`) and proposes ISR changes (handed to the
  AlterPartition sender, :mod:`.alter_partition`);
- **it leads an unreplicated partition**: no leader state (the single-node fast path): its ISR is this broker
  alone, so its high watermark is its log end after every append (:meth:`append`);
- **another broker leads**: a :class:`.follower.FollowerPartition` fetches from it in the replica fetcher of that
  source broker (:mod:`.fetcher`) and owns the follower high watermark; produce and consumer fetch are answered
  NOT_LEADER_OR_FOLLOWER (:meth:`leader_error`).

Whichever owns it, the native log's ``high_watermark`` (where reads stop) is set in one place only:
:meth:`ReplicaManager._mirror_high_watermark`. Handlers never touch file offsets or high watermarks themselves:
they append through :meth:`append` and ask this manager.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from klog.broker.controller_channel import ControllerConnection
from klog.controller.topics import is_internal
from klog.protocol.errors import ErrorCode, for_code

from .alter_partition import AlterPartitionSender
from .fetcher import ReplicaFetcherManager
from .follower import FollowerPartition
from .leader import FollowerFetchResult, IsrProposal, LeaderPartition, ProduceCompletion
from .replica import FollowedPartition, Key, NativeLogView, monotonic_ms
from .selector import NO_PREFERRED_REPLICA, ReplicaView, preferred_read_replica
from .throttle import ReplicationThrottle

if TYPE_CHECKING:
    from klog._native import ProducedBatch

__all__ = ["ISR_TICK_MS", "ReplicaManager", "monotonic_ms"]

log = logging.getLogger("klog.broker.replication")

NONE = int(ErrorCode.NONE)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
OFFSET_OUT_OF_RANGE = int(ErrorCode.OFFSET_OUT_OF_RANGE)
INVALID_TOPIC_EXCEPTION = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
KAFKA_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)
POLICY_VIOLATION = int(ErrorCode.POLICY_VIOLATION)
NO_LEADER = -1
ACKS_ALL = -1
#: How often leaders expire acks=all produces past their deadline and look for lagging ISR members.
ISR_TICK_MS = 100


class ReplicaManager:
    """``partitions``: the broker's :class:`klog.broker.partitions.PartitionManager`; ``config``: the broker
    config. The image is the one last published (:meth:`on_image`): its broker registrations decide ISR
    eligibility.

    As Kafka's, it makes its own collaborators: with ``leader_address`` (broker id -> its (host, port) for replica
    fetches, None while unknown) the replica fetchers (:attr:`fetchers`; ``on_follower_appended`` /
    ``on_follower_truncated`` let the producer state follow what they append or cut), with ``controller`` (a
    connection to the active controller of a multi-node quorum) the AlterPartition sender of its ISR changes;
    ``connector``: the broker's klog.broker.security.InterBrokerConnector (default: one from ``config``)."""

    def __init__(self, node_id: int, config: Any, partitions: Any, *,
                 clock: Callable[[], int] = monotonic_ms,
                 leader_address: Callable[[int], tuple[str, int] | None] | None = None,
                 on_follower_appended: Callable[[Key, Any], None] = lambda key, records: None,
                 on_follower_truncated: Callable[[Key, int], None] = lambda key, end: None,
                 controller: ControllerConnection | None = None, connector: Any = None,
                 restored_high_watermarks: Mapping[Key, int] | None = None,
                 first_unstable_offset: Callable[[str, int, int], int] | None = None) -> None:
        """``restored_high_watermarks``: what the last clean stop checkpointed (klog.broker.clean_shutdown);
        ``first_unstable_offset(topic, partition, high watermark)``: the partition's transactions' bound (the log
        cleaner never cleans past it, the native front never moves the high watermark past it; no bound for a
        partition without transactions)."""
        self.first_unstable_offset = first_unstable_offset
        self.node_id = node_id
        self.config = config
        self.partitions = partitions
        self.image: Any = None
        self.clock = clock
        self.leaders: dict[Key, LeaderPartition] = {}
        #: local replicas this broker does not lead (followers, or partitions without a leader)
        self.not_leader: set[Key] = set()
        self.followed: dict[Key, FollowedPartition] = {}
        #: local partitions with more than one replica (led or followed): their high watermark is a replication
        #: state's, not the log end
        self._replicated: set[Key] = set()
        #: the replica fetchers of the partitions this broker follows (None: no address to fetch from)
        self.fetchers: ReplicaFetcherManager | None = None if leader_address is None else ReplicaFetcherManager(
            node_id, config, leader_address, self, on_appended=on_follower_appended,
            on_truncated=on_follower_truncated,
            throttle=ReplicationThrottle.follower(node_id, lambda: self.image, config, monotonic_ms),
            connector=connector)
        #: sends the ISR changes the leaders propose to the active controller (None: a single voter, whose
        #: partitions have one replica each)
        self.alter_partition: AlterPartitionSender | None = None if controller is None else \
            AlterPartitionSender(self, controller)
        self._tick_task: asyncio.Task[None] | None = None
        #: replicated partitions whose high watermark this manager has set since the broker started
        self._hw_known: set[Key] = set()
        #: replicated partitions' high watermarks at the last clean stop, taken by their first image
        self._restored_hw: dict[Key, int] = dict(restored_high_watermarks or {})
        #: partitions this broker leads in the image whose last fetched batches were still being appended: their
        #: leader epoch starts once that append ends (:meth:`on_follower_append_done`), after those batches
        self._leading_after_append: set[Key] = set()
        #: DeleteRecords waiting for the followers' log start offsets (Kafka's delayed delete records):
        #: key -> [(offset asked for, future of the low watermark)]
        self._delete_waiters: dict[Key, list[tuple[int, asyncio.Future[int]]]] = {}

    # ---- metadata ------------------------------------------------------------------------------------------

    def on_image(self, image: Any, topics: Iterable[str], deleted: Iterable[str] = ()) -> None:
        """The image changed the partitions of ``topics`` (names) and deleted ``deleted``: become leader or
        follower of each local partition as it says."""
        self.image = image
        topics = list(topics)
        deleted = list(deleted)
        # leadership, ISR or replicas may change below: the native paths learn their partitions again. An image that
        # changed no partition (the controller's idle no-op records, a broker's heartbeat state) keeps them
        if topics or deleted:
            self.partitions.forget_native_routes()
        for name in deleted:
            for key in [k for k in (*self.leaders, *self.followed, *self.not_leader) if k[0] == name]:
                self._forget(key)
        now = self.clock()
        for name in topics:
            topic = image.topic(name)
            if topic is None:
                continue
            for index, reg in topic.partitions.items():
                key = (name, index)
                if self.node_id not in reg.replicas:
                    if key in self.leaders or key in self.followed or key in self.not_leader:
                        self._forget(key)
                    continue
                native = self.partitions.get(name, index)
                if native is None:
                    continue
                if len(reg.replicas) > 1 and key not in self._hw_known:
                    # Opened at this start with HW = log end (the single-replica rule): the log may hold batches no
                    # other replica has. Start from the HW the last clean stop checkpointed, else (after a crash)
                    # from the log start, as a leader without its HW checkpoint: followers' fetches (or the
                    # leader's) move it up again.
                    self._hw_known.add(key)
                    restored = self._restored_hw.pop(key, native.log_start_offset)
                    self._mirror_high_watermark(key, native, max(native.log_start_offset,
                                                                 min(restored, native.log_end_offset)))
                if reg.leader == self.node_id:
                    self._become_leader(key, topic.id, reg, native, now)
                else:
                    self._become_follower(key, topic.id, reg, native)
        for key in list(self._delete_waiters):   # a fenced follower no longer holds DeleteRecords back
            self._complete_deletes(key, self.leaders.get(key))

    def still_appending(self, key: Key) -> bool:
        """A follower append of ``key`` is under way (its thread appends even if its fetcher stopped)."""
        return self.fetchers is not None and key in self.fetchers.appending

    def _become_leader(self, key: Key, topic_id: uuid.UUID, reg: Any, native: Any, now: int) -> None:
        self._stop_following(key)
        if key not in self.leaders and self.still_appending(key):
            # Kafka's makeLeader waits for the fetcher: were the new epoch to start at today's log end, the
            # batches being appended (the old leader's epoch) would land inside it, and every follower fetching
            # past them would be told to truncate back, again and again (found by the failover tests)
            if key not in self._leading_after_append:
                log.info("partition %s-%d: leader in epoch %d once the batches being appended are in", key[0],
                         key[1], reg.leader_epoch)
            self.not_leader.add(key)
            self._leading_after_append.add(key)
            return
        self._leading_after_append.discard(key)
        self.not_leader.discard(key)
        if len(reg.replicas) == 1:
            self._replicated.discard(key)
            leader = self.leaders.pop(key, None)
            self._mirror_high_watermark(key, native, native.log_end_offset, raise_only=True)   # ISR: this broker alone
            # known from now on: replicas added later join the ISR once caught up, so the high watermark stays
            # (not the restart rule of on_image for a replicated partition first seen, which would move it back)
            self._hw_known.add(key)
            if leader is not None:
                # (a reassignment shrank it to this broker) what waited for the followers is done: the produces are
                # committed, and the low watermark DeleteRecords waits for is this log's start
                self._complete(leader.leave_alone())
                for _, future in self._delete_waiters.pop(key, []):
                    if not future.done():
                        future.set_result(native.log_start_offset)
            return
        self._replicated.add(key)
        leader = self.leaders.get(key)
        if leader is None:
            effective = self.partitions.topic_config(key[0])
            leader = LeaderPartition(
                self.node_id, topic_id, key[1], tuple(reg.replicas), tuple(reg.isr), reg.leader_epoch,
                reg.partition_epoch, NativeLogView(native), high_watermark=native.high_watermark, now_ms=now,
                min_insync_replicas=effective["min.insync.replicas"],
                replica_lag_time_max_ms=self.config["replica.lag.time.max.ms"],
                is_isr_eligible=self._isr_eligible)
            self.leaders[key] = leader
            log.info("partition %s-%d: leader in epoch %d, replicas %s, ISR %s, HW %d", key[0], key[1],
                     reg.leader_epoch, list(reg.replicas), list(reg.isr), leader.high_watermark)
            self._publish_hw(key, leader)
            return
        # the topic's configs may have changed in the same delta as the partition (on_log_config is not called then)
        leader.min_insync_replicas = self.partitions.topic_config(key[0])["min.insync.replicas"]
        still, completions = leader.on_metadata(reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas,
                                                reg.isr, now)
        assert still
        self._complete(completions)
        self._publish_hw(key, leader)

    def on_follower_append_done(self, key: Key) -> None:
        """The fetcher's append (or truncation) of ``key`` ended: the followed partition mirrors the epochs it
        left, and a leadership that waited for it starts, at the log end now."""
        followed = self.followed.get(key)
        if followed is not None:
            # one followed anew meanwhile (a leadership that came and went) mirrored the epochs before the append
            # ended: with the old mirror its next fetch would name a last fetched epoch the log no longer ends
            # in, and the leader would have it truncate batches it holds
            followed.log.refresh_epochs()
        if key not in self._leading_after_append or self.still_appending(key):
            return
        self._leading_after_append.discard(key)
        self.partitions.forget_native_routes()
        topic = None if self.image is None else self.image.topic(key[0])
        reg = None if topic is None else topic.partitions.get(key[1])
        native = self.partitions.get(*key)
        if topic is None or reg is None or reg.leader != self.node_id or native is None:
            return
        self.partitions.start_leader_epoch(key[0], key[1], reg.leader_epoch)
        self._become_leader(key, topic.id, reg, native, self.clock())

    def on_follower_write_failed(self, followed: FollowedPartition, exc: OSError) -> None:
        """The fetcher's append or truncation of ``followed`` failed with a storage error: its log dir goes
        offline whatever the error (ENOSPC, EIO, but also a segment roll that met a directory, a closed log after a
        full truncation that failed midway, ...), as Kafka's fetcher hands any IOException of a log write to the
        LogDirFailureChannel: retried, the same write failed at every round for ever and the replica silently
        fell out of the ISR. The broker then reports the dir, its partitions stop being fetched
        (:meth:`on_log_dirs_offline`) and refuse writes."""
        self.partitions.note_log_write_failure(*followed.key, exc, log_=followed.log.native)

    def _become_follower(self, key: Key, topic_id: uuid.UUID, reg: Any, native: Any) -> None:
        self._leading_after_append.discard(key)
        leader = self.leaders.pop(key, None)
        if leader is not None:
            self._complete(leader.resign())
            self._complete_deletes(key, None)
            log.info("partition %s-%d: no longer the leader (epoch %d, leader %d)", key[0], key[1],
                     reg.leader_epoch, reg.leader)
        self.not_leader.add(key)
        self._replicated.add(key)
        if reg.leader == NO_LEADER or self.partitions.log_dir_offline(native):
            # no leader, or its log dir failed (KIP-858: an offline replica fetches nothing, as Kafka's)
            self._stop_following(key)
            return
        followed = self.followed.get(key)
        if followed is not None and followed.state.leader_id == reg.leader \
                and followed.state.leader_epoch == reg.leader_epoch:
            return
        if followed is None:
            state = FollowerPartition(reg.leader, reg.leader_epoch, high_watermark=native.high_watermark,
                                      fetch_backoff_ms=self.config["replica.fetch.backoff.ms"])
            followed = self.followed[key] = FollowedPartition(key, topic_id, NativeLogView(native), state)
            old_leader = None
        else:
            old_leader = followed.state.leader_id
            followed.state.become_follower(reg.leader, reg.leader_epoch)
        log.info("partition %s-%d: follower of broker %d in epoch %d", key[0], key[1], reg.leader,
                 reg.leader_epoch)
        if self.fetchers is not None:
            if old_leader is not None and old_leader != reg.leader:
                self.fetchers.remove(key, old_leader)
            self.fetchers.add(followed)

    def on_log_dirs_offline(self) -> None:
        """Log dirs went offline: stop fetching for the followed partitions in them (their appends would fail; the
        controller takes them out of the ISR once the broker reports the dirs)."""
        for key in list(self.followed):
            native = self.partitions.get(*key)
            if native is not None and self.partitions.log_dir_offline(native):
                log.warning("partition %s-%d: its log dir is offline; no longer fetching it", key[0], key[1])
                self._stop_following(key)

    def _stop_following(self, key: Key) -> None:
        followed = self.followed.pop(key, None)
        if followed is not None and self.fetchers is not None:
            self.fetchers.remove(key, followed.state.leader_id)

    def _forget(self, key: Key) -> None:
        self._leading_after_append.discard(key)
        leader = self.leaders.pop(key, None)
        if leader is not None:
            self._complete(leader.resign())
            self._complete_deletes(key, None)
        self._stop_following(key)
        self.not_leader.discard(key)
        self._replicated.discard(key)
        self._hw_known.discard(key)

    def _isr_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        """KIP-903: registered with the epoch it fetched with (-1: not given), unfenced, not shutting down."""
        reg = None if self.image is None else self.image.brokers.get(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown \
            and (broker_epoch == -1 or reg.epoch == broker_epoch)

    def broker_epoch(self) -> int:
        reg = None if self.image is None else self.image.brokers.get(self.node_id)
        return -1 if reg is None else int(reg.epoch)

    # ---- requests -------------------------------------------------------------------------------------------

    def leader_error(self, topic: str, partition: int) -> int:
        """NOT_LEADER_OR_FOLLOWER for a local partition this broker does not lead, or leads but is still appending
        and replaying the last batches it fetched as a follower (as Kafka's makeLeader waits for the fetcher), else
        NONE."""
        key = (topic, partition)
        if key in self.not_leader or (self.fetchers is not None and key in self.fetchers.appending):
            return NOT_LEADER_OR_FOLLOWER
        return NONE

    def high_watermark_lagging(self, topic: str, partition: int) -> bool:
        """Whether this broker leads the partition with its high watermark still below the offset its leadership
        started at (a new leader before its followers caught up): offsets past the high watermark may be committed,
        so ListOffsets answers clients OFFSET_NOT_AVAILABLE instead of offsets that may go backwards (Kafka's
        ``Partition.fetchOffsetForTimestamp``)."""
        leader = self.leaders.get((topic, partition))
        return leader is not None and leader.leader_epoch_start_offset > leader.high_watermark

    def follower_fetch(self, topic: str, partition: int, replica_id: int, broker_epoch: int,
                       current_leader_epoch: int, fetch_offset: int, last_fetched_epoch: int,
                       log_start_offset: int) -> FollowerFetchResult:
        """A replica's Fetch of one partition: the leader's verdict (read records from ``fetch_offset`` up to the
        log end when ``read``); its fetch position moves the high watermark and may complete acks=all produces."""
        key = (topic, partition)
        leader = self.leaders.get(key)
        if leader is None:
            native = self.partitions.get(topic, partition)
            code = UNKNOWN_TOPIC_OR_PARTITION if native is None else NOT_LEADER_OR_FOLLOWER
            return FollowerFetchResult(code, -1, -1)
        result = leader.follower_fetch(replica_id, broker_epoch, current_leader_epoch, fetch_offset,
                                       last_fetched_epoch, log_start_offset, self.clock())
        self._complete(result.completions)
        if key in self._delete_waiters:
            self._complete_deletes(key, leader)
        self._publish_hw(key, leader)
        if result.proposal is not None:
            self._propose_isr(key, result.proposal)
        return result

    def leadership(self, topic: str, partition: int) -> tuple[int, int, int] | None:
        """What a replica's fetch verdict depends on besides the fetch: this broker's leader state of the partition
        (None: none) and its leader and partition epochs. A replica's fetch waiting for data reads again without a
        new verdict while this is unchanged (Kafka judges a replica's fetch once, as it arrives)."""
        leader = self.leaders.get((topic, partition))
        return None if leader is None else (id(leader), leader.leader_epoch, leader.partition_epoch)

    def preferred_read_replica(self, topic: str, partition: int, client_rack: str | None, fetch_offset: int,
                               leader_rack: str | None) -> int:
        """KIP-392: the in-sync follower a consumer in ``client_rack`` should read ``topic``-``partition`` from, or
        -1 (read here). Only a leader with ``replica.selector.class`` set redirects consumers."""
        leader = self.leaders.get((topic, partition))
        if leader is None or not client_rack or not self.config["replica.selector.class"] or self.image is None:
            return NO_PREFERRED_REPLICA
        racks = {b: reg.rack for b, reg in self.image.brokers.items() if not reg.fenced}
        now = self.clock()
        followers = [(ReplicaView(b, racks.get(b), s.log_end_offset, now - s.last_caught_up_time_ms),
                      s.log_start_offset) for b, s in leader.followers.items()]
        me = ReplicaView(self.node_id, leader_rack, leader.log.log_end_offset, 0)
        return preferred_read_replica(client_rack, fetch_offset, me, followers, leader.isr, racks)

    def on_alter_partition_response(self, key: Key, proposal: IsrProposal, error: int, answer: Any) -> bool:
        """The controller's answer to an ISR change this broker's leader proposed; True: send it again."""
        leader = self.leaders.get(key)
        if leader is None:
            return False
        outcome = leader.on_alter_partition_response(proposal, error, answer if error == NONE else None,
                                                     self.clock())
        if error == NONE and leader.pending_isr is None:
            log.info("partition %s-%d: ISR now %s (partition epoch %d)", key[0], key[1], list(leader.isr),
                     leader.partition_epoch)
        elif error != NONE:
            log.info("partition %s-%d: ISR change to %s answered error %d", key[0], key[1], list(proposal.new_isr),
                     error)
        self._complete(outcome.completions)
        self._publish_hw(key, leader)
        return outcome.retry

    def offset_for_leader_epoch(self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
                                ) -> tuple[int, int, int] | None:
        """(error, epoch, end offset) from a replicated partition's leader state; None when this broker keeps
        no leader state for it (unreplicated: the handler answers from the log)."""
        leader = self.leaders.get((topic, partition))
        if leader is None:
            return None
        error, answer = leader.offset_for_leader_epoch(current_leader_epoch, leader_epoch)
        return error, answer.epoch, answer.end_offset

    def append(self, topic: str, partition: int, records: bytes | ProducedBatch, *, now_ms: int | None = None,
               required_acks: int = 1, recorded: Callable[[Any], None] | None = None) -> Any:
        """Append ``records`` as the leader (Kafka's appendRecordsToLeader) and move the high watermark as its owner
        says: an unreplicated partition's to the log end; a replicated one's only when its ISR is this broker alone
        (else with the followers' fetches). Raises what :meth:`PartitionManager.append` raises, and, as Kafka's
        appendRecordsToLeader, a :class:`KafkaError` before appending: NOT_LEADER_OR_FOLLOWER when this broker does
        not lead the partition now (:meth:`leader_error`), NOT_ENOUGH_REPLICAS for ``required_acks`` -1 with the ISR
        under ``min.insync.replicas``. A caller checks these first, but one that awaited since (a produce waiting for
        its transaction coordinator's verification, a large batch validated off the loop) may have lost the
        leadership meanwhile: its batch would be stamped with the new leader's epoch (the partition's epoch is the
        image's), at offsets the new leader fills with other batches of that epoch, and no follower truncation finds
        a divergence within one epoch (found by the transactional fault run as replicas disagreeing below the HW).

        ``recorded``: called with the append's result before the high watermark moves, to record the batch's producer
        (Kafka's UnifiedLog updates its producer state inside the append): the first unstable offset set with the
        high watermark comes from that state, and one that did not know yet of the transaction the batch opens let
        the high watermark, and read_committed fetches on the native paths, pass its first offset (franz-go's
        TestTxnEtl read aborted records)."""
        code = self.leader_error(topic, partition)
        if code:
            raise for_code(code, f"this broker does not lead {topic}-{partition}")
        if required_acks == ACKS_ALL:
            code, message = self.check_acks_all(topic, partition)
            if code:
                raise for_code(code, message)
        result = self.partitions.append(topic, partition, records, now_ms=now_ms)
        try:
            if recorded is not None:
                recorded(result)
        finally:
            self._leader_appended((topic, partition))
        return result

    def appended_natively(self, topic: str, partition: int) -> None:
        """The native Produce path appended to ``topic``-``partition`` as its leader: wake the followers' fetches
        and move the high watermark, as :meth:`append` does after its append."""
        key = (topic, partition)
        self.partitions.wake_replicas(key)
        self._leader_appended(key)

    def front_appended(self, topic: str, partition: int) -> None:
        """The native front appended to ``topic``-``partition`` (:meth:`appended_natively`); of a partition with one
        replica it may have moved the high watermark itself (``klog._native.NativeFront``), which the mirror then
        finds in place: the consumers waiting here are woken all the same."""
        self.appended_natively(topic, partition)
        key = (topic, partition)
        if key not in self._replicated:
            self.partitions.wake(key)

    def is_replicated(self, topic: str, partition: int) -> bool:
        """A local partition with more than one replica (its high watermark follows the ISR)."""
        return (topic, partition) in self._replicated

    def _leader_appended(self, key: Key) -> None:
        leader = self.leaders.get(key)
        if leader is not None:
            self._complete(leader.leader_appended(self.clock()))
            self._publish_hw(key, leader)
        elif key not in self._replicated:
            native = self.partitions.get(*key)
            self._mirror_high_watermark(key, native, native.log_end_offset, raise_only=True)

    def follower_high_watermark(self, followed: FollowedPartition) -> None:
        """The replica fetcher moved ``followed``'s follower state (an append or a truncation): mirror its high
        watermark."""
        self._mirror_high_watermark(followed.key, followed.log.native, followed.state.high_watermark)

    def check_acks_all(self, topic: str, partition: int) -> tuple[int, str | None]:
        """Before an acks=all append: the leader's min-ISR rule (:meth:`.leader.LeaderPartition.check_append`),
        with why it refused. A partition without leader state here has a single replica: Kafka 4.x caps
        ``min.insync.replicas`` at the replication factor, so its ISR (this broker) is always enough."""
        leader = self.leaders.get((topic, partition))
        if leader is None:
            return NONE, None
        code = leader.check_append(ACKS_ALL)
        if code == NONE:
            return NONE, None
        return code, (f"The size of the current ISR {list(leader.isr)} is insufficient to satisfy the min.isr "
                      f"requirement of {leader.effective_min_isr} for partition {topic}-{partition}")

    def wait_for_ack(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> asyncio.Future[int] | None:
        """An acks=all batch ending at ``last_offset`` was appended: a future of its error code, answered once the
        ISR has it (NONE), at ``timeout_ms`` (REQUEST_TIMED_OUT), or when leadership moves. None: nothing to wait
        for (an unreplicated partition). A replicated partition this broker no longer leads answers
        NOT_LEADER_OR_FOLLOWER at once: leadership moved between the append and this wait (a broker resumed after
        a pause appends what it was sent, then learns of the new epoch), and the new leader never had the batch,
        so acknowledging it would lose an acks=all write (found by the transactional fault run)."""
        key = (topic, partition)
        leader = self.leaders.get(key)
        if leader is None:
            if key not in self.not_leader:
                return None
            moved: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            moved.set_result(NOT_LEADER_OR_FOLLOWER)
            return moved
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        now = self.clock()
        completions = leader.produce_appended(future, last_offset, now + timeout_ms, now)
        if completions is None:   # the delayed-produce queue is full
            future.set_result(int(ErrorCode.REQUEST_TIMED_OUT))
            return future
        self._complete(completions)
        return future

    def acked_at_once(self, topic: str, partition: int) -> bool:
        """Whether :meth:`wait_for_ack` answers None for any batch of ``topic``-``partition`` (nothing to wait for:
        a partition without replication, which this broker has not lost the leadership of)."""
        key = (topic, partition)
        return key not in self.leaders and key not in self.not_leader

    def wait_for_acks(self, batches: list[tuple[str, int, int]], timeout_ms: int
                      ) -> list[asyncio.Future[int] | None]:
        """The native Produce path's acks=all request: :meth:`wait_for_ack` for each of its appended batches
        (topic, partition, last offset), in order, in one call."""
        return [self.wait_for_ack(topic, partition, last_offset, timeout_ms)
                for topic, partition, last_offset in batches]

    def delete_records(self, topic: str, partition: int, offset: int, *, internal_allowed: bool = False
                       ) -> tuple[int, int, asyncio.Future[int] | None]:
        """Kafka's ReplicaManager.deleteRecordsOnLocalLog and Partition.deleteRecordsOnLeader on one local partition
        log (the DeleteRecords handler, and the share coordinator pruning ``__share_group_state``): the log starts
        at ``offset`` from now on (-1: the high watermark), its segments wholly below it removed. Kafka's checks come
        first, in its order, and a refused request changes nothing: an internal topic INVALID_TOPIC_EXCEPTION
        (unless ``internal_allowed``: the share coordinator's own pruning), a partition without a log here
        NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION when the metadata has none either), one whose log dir is
        offline KAFKA_STORAGE_ERROR (Kafka's Offline partition: its log is not changed), one this broker does
        not lead NOT_LEADER_OR_FOLLOWER (a follower's copy only follows its leader's log start), a topic whose
        cleanup.policy has no ``delete`` POLICY_VIOLATION, an offset below 0 or past the high watermark
        OFFSET_OUT_OF_RANGE. Returns (error code, the log start offset, a future of the partition's low watermark
        once every follower on a live broker has moved its own log start there too (they learn it from their
        fetches), or None when there is nothing to wait for). Raises OSError when the log could not be changed (its
        dir then goes offline)."""
        if is_internal(topic) and not internal_allowed:
            return INVALID_TOPIC_EXCEPTION, -1, None
        log_ = self.partitions.get(topic, partition)
        if log_ is None:
            known = self.image is not None and self.image.partition(topic, partition) is not None
            return (NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION), -1, None
        if self.partitions.log_dir_offline(log_):
            return KAFKA_STORAGE_ERROR, -1, None
        code = self.leader_error(topic, partition)
        if code != NONE:
            return code, -1, None
        if "delete" not in self.partitions.topic_config(topic)["cleanup.policy"]:
            return POLICY_VIOLATION, -1, None
        high_watermark = log_.high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            return OFFSET_OUT_OF_RANGE, -1, None
        try:
            start = log_.delete_records_before(offset) if offset > log_.log_start_offset else log_.log_start_offset
        except OSError as exc:
            # a segment below the new start could not be retired (the log closed itself): the dir goes offline, as
            # Kafka's deleteSegments hands the IOException to the LogDirFailureChannel; a log that a concurrent
            # deletion closed is no failure of the dir
            self.partitions.note_log_write_failure(topic, partition, exc, log_=log_)
            raise
        return NONE, start, self.wait_for_low_watermark(topic, partition, offset)

    def wait_for_low_watermark(self, topic: str, partition: int, offset: int) -> asyncio.Future[int] | None:
        """DeleteRecords moved this leader's log start to ``offset``: a future of the partition's low watermark,
        answered once every follower on a live broker has moved its log start there too (they learn it from their
        fetches), or with -1 when leadership moves (the caller times it out: REQUEST_TIMED_OUT). None: not a
        replicated leader here (nothing to wait for)."""
        key = (topic, partition)
        leader = self.leaders.get(key)
        if leader is None:
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._delete_waiters.setdefault(key, []).append((offset, future))
        self._complete_deletes(key, leader)
        return future

    def _is_alive(self, broker_id: int) -> bool:
        reg = None if self.image is None else self.image.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    def _complete_deletes(self, key: Key, leader: LeaderPartition | None) -> None:
        waiting = self._delete_waiters.pop(key, [])
        low = -1 if leader is None else leader.low_watermark(self._is_alive)
        still = []
        for offset, future in waiting:
            if future.done():
                continue
            if leader is None or low >= offset:
                future.set_result(low)
            else:
                still.append((offset, future))
        if still:
            self._delete_waiters[key] = still

    def on_log_config(self, topic: str) -> None:
        """The topic's configs changed: min.insync.replicas of its leaders follows."""
        value = self.partitions.topic_config(topic)["min.insync.replicas"]
        for key, leader in self.leaders.items():
            if key[0] == topic:
                leader.min_insync_replicas = value

    # ---- high watermark and completions ---------------------------------------------------------------------

    def _publish_hw(self, key: Key, leader: LeaderPartition) -> None:
        self._mirror_high_watermark(key, leader.log.native, leader.high_watermark)  # type: ignore[attr-defined]

    def _mirror_high_watermark(self, key: Key, native: Any, high_watermark: int, *, raise_only: bool = False) -> None:
        """The only writer of a native log's high watermark (reads stop there) besides the native front, set to what
        its owner decided: the partition's leader state, its follower state, or the log end of a partition with one
        replica (``raise_only``: the front raises that one too, each to a log end read a moment before; a plain set
        by the one that read the older end would move it back)."""
        if self.first_unstable_offset is not None:
            # before the high watermark moves: the cleaner must never see a high watermark past an open
            # transaction without the bound that keeps it below that transaction
            native.first_unstable_offset = self.first_unstable_offset(key[0], key[1], high_watermark)
        old = native.high_watermark
        if raise_only:
            if high_watermark > old and native.raise_high_watermark(high_watermark) > old:
                self.partitions.wake(key)   # consumers long-polling at the old HW
        elif high_watermark != old:
            native.high_watermark = high_watermark
            if high_watermark > old:
                self.partitions.wake(key)

    def _propose_isr(self, key: Key, proposal: IsrProposal) -> None:
        if self.alter_partition is not None:
            self.alter_partition.submit(key, proposal)

    @staticmethod
    def _complete(completions: Iterable[ProduceCompletion]) -> None:
        for c in completions:
            if not c.token.done():
                c.token.set_result(c.error)

    # ---- periodic duties ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._tick_task = asyncio.get_running_loop().create_task(self._tick_loop(), name="replica-manager-tick")
        if self.fetchers is not None:
            self.fetchers.start()
        if self.alter_partition is not None:
            self.alter_partition.start()

    async def stop(self) -> None:
        self._leading_after_append.clear()   # an append ending during the shutdown starts no leadership
        if self._tick_task is not None:
            self._tick_task.cancel()
            try:
                await self._tick_task
            except (asyncio.CancelledError, Exception):
                pass
            self._tick_task = None
        for leader in self.leaders.values():
            self._complete(leader.resign())
        for key in list(self._delete_waiters):
            self._complete_deletes(key, None)
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.alter_partition is not None:
            await self.alter_partition.stop()

    def tick(self) -> None:
        now = self.clock()
        for key, leader in list(self.leaders.items()):
            completions, proposal = leader.tick(now)
            self._complete(completions)
            if proposal is not None:
                self._propose_isr(key, proposal)
            # a shrink committed elsewhere may leave the HW able to move
            self._complete(leader.leader_appended(now))
            self._publish_hw(key, leader)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(ISR_TICK_MS / 1000)
            try:
                self.tick()
            except Exception:
                log.exception("replica manager tick failed")
