"""One partition's leader/ISR/ELR change on the active controller, as a PartitionChangeRecord: Kafka's
``PartitionChangeBuilder`` with eligible leader replicas (KIP-966, ``eligible.leader.replicas.version`` >= 1).

Pure. Every controller path that changes a partition's ISR or leader (fencing, controlled shutdown, unfencing,
unclean shutdown, AlterPartition, ElectLeaders) goes through :func:`partition_change`, so the rules live once:

- **ELR** (only with ELR enabled): when the target ISR is at least the topic's effective ``min.insync.replicas``
  (``min(min.insync.replicas, replication factor)``), the ELR and last known ELR are empty. Below it, the ELR is
  the old ELR plus the old ISR, minus the target ISR and minus replicas that shut down uncleanly. Those replicas
  hold every record below the high watermark: with strict min ISR (the leader side) the HW never advances while
  the ISR is under ``min.insync.replicas``, so nothing acknowledged is past what they hold. With ELR the ISR may
  become empty (the last member fenced); without it the last member stays in the ISR.
- **Election** when the current leader is no longer a valid leader: the first acceptable replica in the target
  ISR; with an empty ISR, the first acceptable ELR member (the ISR becomes it alone, it leaves the ELR); with ISR
  and ELR both empty, the last known leader (``last_known_elr``, recorded when the ISR became empty) if
  acceptable, as an unclean election; with ``unclean.leader.election.enable``, any acceptable replica. An unclean
  election resets the ISR to the new leader, marks it RECOVERING and clears the ELR.
- **Last known leader**: recorded the first time the ISR becomes empty, cleared once the partition has a leader.

No record when nothing changes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable
from typing import Any

from klog.metadata.image import NO_LEADER, ConfigResourceType, LeaderRecoveryState, MetadataImage, \
    PartitionRegistration, TopicImage
from klog.metadata.records import MetadataRecord, MetadataRecordType, record

__all__ = ["ELR_FEATURE", "ELR_FEATURE_LEVEL", "MIN_INSYNC_REPLICAS", "Election", "clear_elr_records",
           "effective_min_isr", "elr_enabled", "elr_min_isr_refusal", "elr_safety_records", "partition_change"]

#: The feature that turns eligible leader replicas on (finalized at 1 in a new cluster, as Kafka 4.1+ does).
ELR_FEATURE = "eligible.leader.replicas.version"
#: The highest level of it this code knows (and the one a new cluster finalizes).
ELR_FEATURE_LEVEL = 1
#: ``min.insync.replicas`` default (Kafka's).
MIN_INSYNC_REPLICAS = 1


class Election(enum.Enum):
    """Kafka's ``PartitionChangeBuilder.Election``."""

    PREFERRED = 0
    ONLINE = 1
    UNCLEAN = 2


def elr_enabled(image: MetadataImage) -> bool:
    """Kafka's ``isElrEnabled``: the ELR feature is finalized at level 1 or more."""
    return image.features.get(ELR_FEATURE, 0) >= 1


#: the config whose changes the ELR rules below watch
MIN_ISR_KEY = "min.insync.replicas"


def elr_safety_records(image: MetadataImage, static_min_insync_replicas: int) -> list[MetadataRecord]:
    """Kafka's ``maybeGenerateElrSafetyRecords``: the ConfigRecords that make it safe to turn ELR on (a new
    cluster's bootstrap records, an UpdateFeatures enabling it): a cluster-level ``min.insync.replicas`` (the
    active controller's static value) when there is none, and every broker-level one removed, so that every node
    resolves a topic's min ISR as the controller does. ``image``: where the broker resources' dynamic configs are
    read (a new cluster's: the image of its other bootstrap records)."""
    broker_configs = {name: configs for (rtype, name), configs in image.configs.items()
                      if rtype == ConfigResourceType.BROKER}
    out = []
    if MIN_ISR_KEY not in broker_configs.get("", {}):
        out.append(record("ConfigRecord", resource_type=int(ConfigResourceType.BROKER), resource_name="",
                          name=MIN_ISR_KEY, value=str(static_min_insync_replicas)))
    for name in sorted((n for n in broker_configs if n), key=int):
        if MIN_ISR_KEY in broker_configs[name]:
            out.append(record("ConfigRecord", resource_type=int(ConfigResourceType.BROKER), resource_name=name,
                              name=MIN_ISR_KEY, value=None))
    return out


def elr_min_isr_refusal(broker: str, value: str | None) -> str | None:
    """With ELR on, Kafka's ``isDisallowedBrokerMinIsrTransition``/``isDisallowedClusterMinIsrTransition``: why a
    ConfigRecord of ``min.insync.replicas`` on broker resource ``broker`` (``value`` None: a removal) is refused
    (INVALID_CONFIG), or None."""
    if broker:
        return f"Broker-level {MIN_ISR_KEY} cannot be altered while ELR is enabled."
    if value is None:
        return f"Cluster-level {MIN_ISR_KEY} cannot be removed while ELR is enabled."
    return None


def clear_elr_records(config_records: Iterable[MetadataRecord]) -> list[MetadataRecord]:
    """Kafka's ``createClearElrRecordsAsNeeded`` (with ELR on): a ``min.insync.replicas`` change clears the ELR
    it was computed against, a topic's its own ELRs, the cluster's every ELR (a ClearElrRecord without a topic)."""
    out = []
    for r in config_records:
        if r.type == MetadataRecordType.CONFIG_RECORD and r.data.name == MIN_ISR_KEY:
            topic = r.data.resource_name if r.data.resource_type == ConfigResourceType.TOPIC else ""
            out.append(record("ClearElrRecord", topic_name=topic))
    return out


def effective_min_isr(image: MetadataImage, topic: TopicImage, default: int = MIN_INSYNC_REPLICAS) -> int:
    """Kafka's ``getTopicEffectiveMinIsr``: the topic's ``min.insync.replicas``, else the cluster-wide dynamic one,
    else ``default`` (the controller's static config), capped at the replication factor."""
    value = image.topic_config(topic.name).get("min.insync.replicas")
    if value is None:
        value = image.configs.get((ConfigResourceType.BROKER, ""), {}).get("min.insync.replicas")
    min_isr = int(value) if value is not None else default
    first = next(iter(topic.partitions.values()), None)
    replication_factor = len(first.replicas) if first is not None else min_isr
    return max(1, min(min_isr, replication_factor))


def unclean_election_allowed(image: MetadataImage, topic: str, default: bool) -> bool:
    """The topic's ``unclean.leader.election.enable``, else the cluster-wide dynamic one (the default broker
    resource ""), else ``default`` (the controller's static config), as Kafka's controller resolves it."""
    value = image.topic_config(topic).get("unclean.leader.election.enable")
    if value is None:
        value = image.configs.get((ConfigResourceType.BROKER, ""), {}).get("unclean.leader.election.enable")
    return default if value is None else value.strip().lower() == "true"


def _elect(p: PartitionRegistration, isr: list[int], elr: list[int], acceptable: Callable[[int], bool],
           election: Election, elr_on: bool) -> tuple[int, bool]:
    """(new leader or NO_LEADER, unclean)."""
    def valid(r: int) -> bool:
        return (r in isr or (not isr and r in elr)) and acceptable(r)

    if election == Election.PREFERRED and p.replicas and valid(p.replicas[0]):
        return p.replicas[0], False
    if p.leader != NO_LEADER and valid(p.leader):
        return p.leader, False
    leader = next((r for r in p.replicas if valid(r)), NO_LEADER)
    if leader != NO_LEADER:
        return leader, False
    if elr_on and not isr and not elr and len(p.last_known_elr) == 1 and acceptable(p.last_known_elr[0]):
        return p.last_known_elr[0], True
    if election == Election.UNCLEAN:
        leader = next((r for r in p.replicas if acceptable(r)), NO_LEADER)
        if leader != NO_LEADER:
            return leader, True
    return NO_LEADER, False


def partition_change(topic: TopicImage, partition_id: int, p: PartitionRegistration, *, target_isr: list[int],
                     acceptable: Callable[[int], bool], elr: bool, min_isr: int,
                     election: Election = Election.ONLINE, unclean_shutdown: Collection[int] = (),
                     leader_recovery_state: LeaderRecoveryState | None = None) -> MetadataRecord | None:
    """The PartitionChangeRecord taking ``p`` to ``target_isr`` (and electing a leader if its current one is no
    longer valid), or None when nothing changes. ``acceptable``: may this broker lead (Kafka's LeaderAcceptor);
    ``elr``: eligible leader replicas enabled; ``min_isr``: the topic's effective min ISR."""
    assert min_isr >= 1, min_isr
    isr = list(target_isr)
    target_elr = list(p.elr)
    if elr:
        if len(isr) >= min_isr:
            target_elr = []
        else:
            candidates = list(p.elr) + [r for r in p.isr if r not in p.elr]
            target_elr = [r for r in candidates if r not in isr and r not in unclean_shutdown]
    changes: dict[str, Any] = {}
    leader, unclean = _elect(p, isr, target_elr, acceptable, election, elr)
    if leader != p.leader:
        changes["leader"] = leader
        if leader in target_elr:   # an ELR member leads: it is the whole ISR now
            isr = [leader]
            target_elr = [r for r in target_elr if r != leader]
        if unclean:   # the ISR is forced to the new leader, which may lack acknowledged records
            changes["isr"] = [leader]
            if p.leader_recovery_state != LeaderRecoveryState.RECOVERING:
                changes["leader_recovery_state"] = int(LeaderRecoveryState.RECOVERING)
    if unclean or not elr:
        target_elr = []
    if tuple(target_elr) != p.elr:
        changes["eligible_leader_replicas"] = target_elr
    if "isr" not in changes and (isr or elr) and tuple(isr) != p.isr:
        changes["isr"] = isr
    if elr:
        new_leader = changes.get("leader", p.leader)
        if "isr" in changes and not changes["isr"] and p.leader != NO_LEADER and p.last_known_elr != (p.leader,):
            changes["last_known_elr"] = [p.leader]   # the first time the ISR becomes empty
        elif new_leader != NO_LEADER and p.last_known_elr:
            changes["last_known_elr"] = []
    elif p.last_known_elr:
        changes["last_known_elr"] = []
    if leader_recovery_state is not None and "leader_recovery_state" not in changes \
            and leader_recovery_state != p.leader_recovery_state:
        changes["leader_recovery_state"] = int(leader_recovery_state)
    if not changes:
        return None
    return record("PartitionChangeRecord", partition_id=partition_id, topic_id=topic.id, **changes)
