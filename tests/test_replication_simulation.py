"""One partition replicated on three brokers, with the controller, on a simulated clock and simulated logs.

The leader (klog.broker.replication.leader), the followers (klog.broker.replication.follower) and the
controller's AlterPartition (klog.controller.partitions_isr) and fencing/election (klog.controller.brokers'
``leader_and_isr_changes``) are driven by a seeded random schedule of acks=all produces, follower fetches, ISR
checks, broker crashes and restarts, isolations (a broker that talks to nobody, fenced by the controller while it
still believes it leads) and leader changes. Metadata reaches a connected broker when it is committed or,
at random, some steps later (stale leaders and followers meet FENCED/UNKNOWN_LEADER_EPOCH and stale AlterPartition
epochs); AlterPartition answers arrive before or after the metadata at random. Broker 3 replicates the pre-KIP-595 way
(OffsetsForLeaderEpoch, no last fetched epoch). Logs survive crashes (no unflushed-data loss is modelled).

Kafka's invariants, checked after every step:
- every offset acknowledged to an acks=all producer is in the controller's current leader's log, as written;
- a leader's high watermark never goes backwards and never passes its log end;
- a follower's log, whenever it appends fetched records, is a prefix of its leader's log.
After healing every fault, all three logs are the same and hold every acknowledged offset.
"""

from __future__ import annotations

import os
import random
import uuid
from typing import Any

import pytest

from klog.broker.replication.follower import Action, ActionKind, FollowerPartition
from klog.broker.replication.leader import IsrProposal, LeaderPartition, ProduceCompletion
from klog.controller.brokers import leader_and_isr_changes
from klog.controller.partitions_isr import alter_partition
from klog.metadata.delta import replay
from klog.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration
from klog.metadata.records import MetadataRecord, record
from klog.protocol import ApiKey, decode_body, encode_body
from klog.protocol.errors import ErrorCode
from replication_support import SimLog

TOPIC = uuid.UUID(int=0xC0FFEE)
BROKERS = (1, 2, 3)
OLD_PATH_BROKERS = {3}
MIN_ISR = 2
LAG_MS = 10_000
REQUEST_TIMEOUT_MS = 30_000
#: Seeds in a run: a short seeded sweep in the suite, ``make chaos-replication`` runs 500.
SEEDS = int(os.environ.get("KLOG_REPLICATION_SIM_SEEDS", "12"))
#: Seeds whose schedules lose acknowledged offsets when the HW ignores a pending ISR addition (KIP-497's maximal
#: ISR): an expansion the controller committed but the leader had not heard of, then an election of that follower.
MAXIMAL_ISR_SEEDS = (84, 107)
#: Chance that a connected broker sees a metadata change only some steps later (then 40% a step).
METADATA_LAG_CHANCE = 0.3
#: Chance that an AlterPartition answer reaches its leader only some steps later (then 40% a step).
RESPONSE_LAG_CHANCE = 0.5
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
UNKNOWN_LEADER_EPOCH = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


def is_prefix(a: SimLog, b: SimLog) -> bool:
    """``a``'s records, where both logs hold them, are ``b``'s, and ``a`` ends no later than ``b``."""
    lo = max(a.log_start_offset, b.log_start_offset)
    n = a.log_end_offset - lo
    return a.log_end_offset <= b.log_end_offset and a.read(lo, n) == b.read(lo, n)


class Broker:
    def __init__(self, broker_id: int, epoch: int) -> None:
        self.id = broker_id
        self.epoch = epoch
        self.log = SimLog()
        self.alive = True
        self.isolated = False
        self.leader: LeaderPartition | None = None
        self.follower: FollowerPartition | None = None
        self.outbox: IsrProposal | None = None  # an AlterPartition to (re)send

    @property
    def connected(self) -> bool:
        return self.alive and not self.isolated


class Simulation:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 0
        self.metadata_offset = 0
        self.image = MetadataImage()
        self.acked: dict[int, int] = {}  # offset -> epoch of every acknowledged record
        self.deleted_before = 0  # acknowledged offsets below it were deleted on purpose (DeleteRecords)
        self.hw_seen: dict[tuple[int, int], int] = {}  # (broker, leader epoch) -> last HW
        self.brokers = {b: Broker(b, 100 + b) for b in BROKERS}
        self.lagging: set[int] = set()  # brokers whose metadata is behind the controller's
        self.in_flight: list[tuple[Any, ...]] = []  # AlterPartition answers not delivered yet
        self.stats = {"acked": 0, "refused": 0, "timed_out": 0, "elections": 0, "truncations": 0, "isr_changes": 0,
                      "stale_fetches": 0, "rejected_isr_changes": 0, "deletions": 0, "out_of_range": 0}
        recs = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
        recs += [record("RegisterBrokerRecord", broker_id=b, broker_epoch=self.brokers[b].epoch,
                        incarnation_id=uuid.UUID(int=b), fenced=False) for b in BROKERS]
        recs += [record("TopicRecord", name="t", topic_id=TOPIC),
                 record("PartitionRecord", partition_id=0, topic_id=TOPIC, replicas=list(BROKERS), isr=list(BROKERS),
                        leader=1, leader_epoch=0, partition_epoch=0)]
        self.commit(recs)

    # ---- controller -------------------------------------------------------------------------------------------

    @property
    def partition(self) -> PartitionRegistration:
        return self.image.topics_by_id[TOPIC].partitions[0]

    def commit(self, records: list[MetadataRecord], *, deliver: bool = True) -> None:
        if records:
            before = self.partition.leader_epoch if self.image.topics_by_id else None
            self.image, _ = replay(self.image, records, self.metadata_offset)
            self.metadata_offset += len(records)
            if before is not None and self.partition.leader_epoch != before:
                self.stats["elections"] += 1
        if deliver:
            for b in self.brokers.values():
                if b.connected:
                    if self.rng.random() < METADATA_LAG_CHANCE:
                        self.lagging.add(b.id)  # this broker sees the change a few steps later
                    else:
                        self.deliver(b)

    def active(self, broker_id: int) -> bool:
        reg = self.image.brokers.get(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    def eligible(self, broker_id: int, broker_epoch: int) -> bool:
        reg = self.image.brokers.get(broker_id)
        return self.active(broker_id) and reg is not None and broker_epoch in (-1, reg.epoch)

    def elections(self, *, remove: int = NO_LEADER, add: int = NO_LEADER) -> list[MetadataRecord]:
        topic = self.image.topics_by_id[TOPIC]
        p = self.partition
        affected = remove in p.isr or p.leader == remove or (add != NO_LEADER and p.leader == NO_LEADER)
        if not affected:
            return []
        return leader_and_isr_changes(self.image, self.active, lambda name: False, iter([(topic, 0, p)]),
                                      remove=remove, add=add)

    def fence(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        self.commit([record("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=b.epoch, fenced=1)])
        self.commit(self.elections(remove=broker_id))

    def unfence(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        recs = [record("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=b.epoch, fenced=-1)]
        self.image, _ = replay(self.image, recs, self.metadata_offset)
        self.metadata_offset += 1
        self.commit(self.elections(add=broker_id))

    def send_alter_partition(self, b: Broker) -> None:
        proposal = b.outbox
        assert proposal is not None and b.leader is not None
        body = {"broker_id": b.id, "broker_epoch": b.epoch,
                "topics": [{"topic_id": proposal.topic_id, "partitions": [proposal.request_partition()]}]}
        raw = encode_body(ApiKey.ALTER_PARTITION, 3, body, response=False)
        request = decode_body(ApiKey.ALTER_PARTITION, 3, raw, response=False)[0]
        result = alter_partition(request, 3, self.image)
        response = decode_body(ApiKey.ALTER_PARTITION, 3,
                               encode_body(ApiKey.ALTER_PARTITION, 3, result.response, response=True), response=True)[0]
        self.commit(list(result.records))
        if result.records:
            self.stats["isr_changes"] += 1
        if response.error_code:
            outcome_error, data = response.error_code, None
        else:
            data = response.topics[0].partitions[0]
            outcome_error = data.error_code
        if outcome_error:
            self.stats["rejected_isr_changes"] += 1
        b.outbox = None
        answer = (b.id, b.leader, proposal, outcome_error, data)
        if self.rng.random() < RESPONSE_LAG_CHANCE:
            self.in_flight.append(answer)  # the answer arrives some steps later, before or after the metadata
        else:
            self.answer_alter_partition(*answer)

    def answer_alter_partition(self, broker_id: int, leader: LeaderPartition | None, proposal: IsrProposal,
                               error: int, data: Any) -> None:
        b = self.brokers[broker_id]
        if b.leader is None or b.leader is not leader or not b.connected:
            return  # that leader is gone; its answer is not read
        outcome = b.leader.on_alter_partition_response(proposal, error, data, self.now)
        self.completed(outcome.completions)
        if outcome.retry:
            b.outbox = proposal

    # ---- brokers ----------------------------------------------------------------------------------------------

    def deliver(self, b: Broker) -> None:
        """Metadata reaches broker ``b``: it leads, follows or waits as the partition's registration says."""
        self.lagging.discard(b.id)
        p = self.partition
        if p.leader == b.id:
            if b.leader is not None and b.leader.leader_epoch == p.leader_epoch:
                _, done = b.leader.on_metadata(p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, self.now)
                self.completed(done)
                return
            if b.leader is not None and b.leader.leader_epoch > p.leader_epoch:
                return
            self.completed(b.leader.resign() if b.leader is not None else ())
            b.leader = LeaderPartition(b.id, TOPIC, 0, p.replicas, p.isr, p.leader_epoch, p.partition_epoch, b.log,
                                       b.log.high_watermark, self.now, min_insync_replicas=MIN_ISR,
                                       replica_lag_time_max_ms=LAG_MS, is_isr_eligible=self.eligible)
            b.follower, b.outbox = None, None
            return
        if b.leader is not None:
            if p.leader_epoch < b.leader.leader_epoch:
                return
            self.completed(b.leader.resign())
            b.leader, b.outbox = None, None
        if p.leader == NO_LEADER:
            b.follower = None
        elif b.follower is None:
            b.follower = FollowerPartition(p.leader, p.leader_epoch, high_watermark=b.log.high_watermark,
                                           use_diverging_epoch=b.id not in OLD_PATH_BROKERS, fetch_backoff_ms=500)
        else:
            b.follower.become_follower(p.leader, p.leader_epoch)

    def completed(self, completions: tuple[ProduceCompletion, ...]) -> None:
        for c in completions:
            if c.error == 0:
                self.stats["acked"] += 1
                for offset, epoch in c.token:
                    self.acked[offset] = epoch
            elif c.error == 7:  # REQUEST_TIMED_OUT
                self.stats["timed_out"] += 1

    def leaders(self) -> list[Broker]:
        return [b for b in self.brokers.values() if b.alive and b.leader is not None]

    def produce(self) -> None:
        candidates = self.leaders()
        if not candidates:
            return
        b = self.rng.choice(candidates)  # a client may still talk to an isolated (zombie) leader
        assert b.leader is not None
        if b.leader.check_append(-1):
            self.stats["refused"] += 1
            return
        n = self.rng.randint(1, 3)
        last = b.log.append_as_leader(n, b.leader.leader_epoch)
        token = tuple(b.log.read(last - n + 1, n))
        done = b.leader.produce_appended(token, last, self.now + REQUEST_TIMEOUT_MS, self.now)
        assert done is not None
        self.completed(done)

    def apply(self, f: Broker, action: Action) -> None:
        if action.kind is ActionKind.TRUNCATE:
            if action.offset < f.log.log_end_offset:
                self.stats["truncations"] += 1
            f.log.truncate_to(action.offset)
        elif action.kind is ActionKind.TRUNCATE_FULLY:
            f.log.truncate_fully(action.offset)
        assert f.follower is not None
        f.log.high_watermark = min(f.follower.high_watermark, f.log.log_end_offset)

    def fetch(self, f: Broker) -> None:
        if not f.connected or f.follower is None:
            return
        src = self.brokers[f.follower.leader_id]
        if not src.connected:
            return
        if src.leader is None:  # it no longer (or not yet) leads: Kafka's answer to a fetch
            self.stats["stale_fetches"] += 1
            f.follower.on_fetch_response(NOT_LEADER_OR_FOLLOWER, high_watermark=-1, log_start_offset=-1,
                                         diverging_epoch=None, log_end_offset=f.log.log_end_offset,
                                         epochs=f.log.epochs, now_ms=self.now)
            return
        lp = src.leader
        req = f.follower.next_request(f.log.log_start_offset, f.log.log_end_offset, f.log.epochs, self.now)
        if isinstance(req, Action):
            if req.kind is ActionKind.LIST_LEADER_OFFSETS:
                self.stats["out_of_range"] += 1
                self.apply(f, f.follower.on_leader_offsets(src.log.log_start_offset, src.log.log_end_offset,
                                                           f.log.log_end_offset))
            elif req.kind is ActionKind.OFFSETS_FOR_LEADER_EPOCH:
                error, answer = lp.offset_for_leader_epoch(f.follower.leader_epoch, req.epoch)
                self.apply(f, f.follower.on_epoch_end_offset(error, answer, f.log.log_end_offset, f.log.epochs,
                                                             self.now))
            return
        r = lp.follower_fetch(f.id, f.epoch, req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch,
                              req.log_start_offset, self.now)
        self.completed(r.completions)
        if r.error in (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH):
            self.stats["stale_fetches"] += 1
        if r.proposal is not None:
            src.outbox = r.proposal
        records = src.log.read(req.fetch_offset, self.rng.randint(1, 6)) if r.read else []
        action = f.follower.on_fetch_response(r.error, high_watermark=r.high_watermark,
                                              log_start_offset=r.log_start_offset, diverging_epoch=r.diverging_epoch,
                                              log_end_offset=f.log.log_end_offset, epochs=f.log.epochs,
                                              now_ms=self.now)
        if action.kind is ActionKind.APPEND:
            f.log.append_as_follower(records)
            start = f.follower.on_appended(r.high_watermark, r.log_start_offset, f.log.log_end_offset)
            f.log.high_watermark = f.follower.high_watermark
            if start > f.log.log_start_offset:
                f.log.delete_before(start)
            assert is_prefix(f.log, src.log), f"broker {f.id}'s log is not a prefix of leader {src.id}'s"
        else:
            self.apply(f, action)

    def tick(self) -> None:
        for b in self.leaders():
            if b.leader is None:
                continue  # an AlterPartition of another leader just committed metadata that moved this one
            done, proposal = b.leader.tick(self.now)
            self.completed(done)
            if proposal is not None:
                b.outbox = proposal
            if b.outbox is not None and b.connected and b.leader is not None:
                self.send_alter_partition(b)

    # ---- faults -----------------------------------------------------------------------------------------------

    def crash(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        b.alive, b.leader, b.follower, b.outbox = False, None, None, None  # waiting producers see a disconnect
        self.fence(broker_id)

    def restart(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        b.alive, b.isolated = True, False
        b.epoch = 1000 + self.metadata_offset  # a new registration, a new broker epoch
        self.commit([record("RegisterBrokerRecord", broker_id=b.id, broker_epoch=b.epoch,
                            incarnation_id=uuid.uuid4(), fenced=True)], deliver=False)
        self.unfence(broker_id)
        self.deliver(b)

    def isolate(self, broker_id: int) -> None:
        self.brokers[broker_id].isolated = True
        self.fence(broker_id)  # its session expires; it keeps its state and may believe it still leads

    def heal(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        b.isolated = False
        self.unfence(broker_id)
        self.deliver(b)

    def delete_records(self) -> None:
        """DeleteRecords (or retention) on the leader, up to its HW: followers behind it get OFFSET_OUT_OF_RANGE."""
        p = self.partition
        if p.leader == NO_LEADER or not self.brokers[p.leader].connected:
            return
        b = self.brokers[p.leader]
        if b.leader is None:
            return
        upto = self.rng.randint(b.log.log_start_offset, b.leader.high_watermark)
        if upto > b.log.log_start_offset:
            b.log.delete_before(upto)
            self.deleted_before = max(self.deleted_before, upto)
            self.stats["deletions"] += 1

    def move_leadership(self) -> None:
        p = self.partition
        others = [r for r in p.isr if r != p.leader and self.active(r) and self.brokers[r].connected]
        if p.leader != NO_LEADER and others:
            self.commit([record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC,
                                leader=self.rng.choice(others))])

    # ---- invariants -------------------------------------------------------------------------------------------

    def check(self) -> None:
        for b in self.leaders():
            assert b.leader is not None
            hw = b.leader.high_watermark
            key = (b.id, b.leader.leader_epoch)
            assert hw >= self.hw_seen.get(key, 0), f"leader {b.id}'s HW went back from {self.hw_seen[key]} to {hw}"
            assert hw <= b.log.log_end_offset
            self.hw_seen[key] = hw
        p = self.partition
        if p.leader != NO_LEADER:
            log = self.brokers[p.leader].log
            lost = {o: e for o, e in self.acked.items() if o >= self.deleted_before and log.read(o, 1) != [(o, e)]}
            assert not lost, f"acknowledged offsets lost on leader {p.leader} (epoch {p.leader_epoch}): {lost}"

    def step(self) -> None:
        self.now += self.rng.randint(0, 2500)
        for broker_id in sorted(self.lagging):
            if self.brokers[broker_id].connected and self.rng.random() < 0.4:
                self.deliver(self.brokers[broker_id])
        waiting, self.in_flight = self.in_flight, []
        for answer in waiting:
            if self.rng.random() < 0.4:
                self.answer_alter_partition(*answer)
            else:
                self.in_flight.append(answer)
        op = self.rng.random()
        down = [b for b in self.brokers.values() if not b.alive]
        cut = [b for b in self.brokers.values() if b.alive and b.isolated]
        up = [b for b in self.brokers.values() if b.connected]
        if op < 0.30:
            self.produce()
        elif op < 0.80:
            for b in self.rng.sample(list(self.brokers.values()), 3):
                self.fetch(b)
        elif op < 0.86 and len(up) > 1:
            self.crash(self.rng.choice(up).id)
        elif op < 0.91 and down:
            self.restart(self.rng.choice(down).id)
        elif op < 0.94 and len(up) > 1 and not cut:
            self.isolate(self.rng.choice(up).id)
        elif op < 0.97 and cut:
            self.heal(cut[0].id)
        elif op < 0.985:
            self.move_leadership()
        else:
            self.delete_records()
        self.tick()
        self.check()

    def deliver_late_messages(self) -> None:
        for broker_id in sorted(self.lagging):
            self.deliver(self.brokers[broker_id])
        waiting, self.in_flight = self.in_flight, []
        for answer in waiting:
            self.answer_alter_partition(*answer)

    def heal_all_and_settle(self, rounds: int = 400) -> None:
        for b in list(self.brokers.values()):
            if not b.alive:
                self.restart(b.id)
            elif b.isolated:
                self.heal(b.id)
        for _ in range(rounds):
            self.deliver_late_messages()
            self.now += 600
            for b in self.brokers.values():
                self.fetch(b)
            self.tick()
            self.check()
            ends = {b.log.log_end_offset for b in self.brokers.values()}
            if len(ends) == 1 and set(self.partition.isr) == set(BROKERS) and self.partition.leader != NO_LEADER:
                break


@pytest.mark.parametrize("seed", sorted(set(range(SEEDS)) | set(MAXIMAL_ISR_SEEDS)))
def test_replicated_partition_keeps_every_acknowledged_offset_through_crashes_isolation_and_elections(seed: int
                                                                                                     ) -> None:
    sim = Simulation(seed)
    for _ in range(600):
        sim.step()
    sim.heal_all_and_settle()
    p = sim.partition
    assert p.leader != NO_LEADER and set(p.isr) == set(BROKERS), (p, sim.stats)
    leader_log = sim.brokers[p.leader].log
    for b in sim.brokers.values():
        assert is_prefix(b.log, leader_log) and b.log.log_end_offset == leader_log.log_end_offset, \
            f"broker {b.id} differs from leader {p.leader} after healing"
    assert all(leader_log.read(o, 1) == [(o, e)] for o, e in sim.acked.items() if o >= sim.deleted_before)
    # the schedule exercised what it is meant to
    assert sim.stats["acked"] > 0 and sim.stats["elections"] > 0, sim.stats


def test_schedules_cover_refusals_truncations_and_isr_changes() -> None:
    totals: dict[str, int] = {}
    for seed in range(min(SEEDS, 12)):
        sim = Simulation(seed)
        for _ in range(600):
            sim.step()
        for k, v in sim.stats.items():
            totals[k] = totals.get(k, 0) + v
    assert all(v > 0 for v in totals.values()), totals
