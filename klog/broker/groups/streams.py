"""Streams groups (KIP-1071: StreamsGroupHeartbeat / StreamsGroupDescribe) as Kafka 4.3's group coordinator runs them:
the coordinator owns the Kafka Streams task assignment.

The first member to join sends the application's *topology* (subtopologies with their source, repartition and
changelog topics); the coordinator keeps it (a StreamsGroupTopology record) and *configures* it against the
topics it knows: the number of tasks of a subtopology is the largest partition count of its source topics, a
repartition topic without an explicit count takes the count of the subtopologies writing to it, a changelog
topic has one partition per task. Missing source topics are reported (MISSING_SOURCE_TOPICS) and no task is
assigned; missing internal topics are created through the controller, as Kafka's broker does, and reported
(MISSING_INTERNAL_TOPICS) until they exist. A ready topology gives the tasks the server-side sticky assignor
spreads over the members (active tasks, then ``num.standby.replicas`` standby tasks on other processes; Kafka's
sticky assignor assigns no warm-up tasks). Members reconcile towards their target one heartbeat at a time, as
consumer-protocol members do: tasks to give up are revoked first (UNREVOKED_TASKS, epoch unchanged), an active
task still owned by another member is assigned once released (UNRELEASED_TASKS). Every change is persisted as
Kafka's StreamsGroup* records in ``__consumer_offsets``.
"""

from __future__ import annotations

import copy
import enum
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from klog.protocol import Struct

from . import records as R
from .consumer import TopicCatalog
from .errors import ErrorCode, GroupError
from .modern import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, GroupRecordTypes, ModernGroup, \
    ModernGroupManager, assignment_due, metadata_hash

if TYPE_CHECKING:  # pragma: no cover
    from klog.broker.coordinator.timer import Timer

log = logging.getLogger("klog.groups")

#: StreamsGroupHeartbeatResponse's status codes (Kafka's StreamsGroupHeartbeatResponse.Status)
STATUS_STALE_TOPOLOGY = 0
STATUS_MISSING_SOURCE_TOPICS = 1
STATUS_INCORRECTLY_PARTITIONED_TOPICS = 2
STATUS_MISSING_INTERNAL_TOPICS = 3
STATUS_SHUTDOWN_APPLICATION = 4
STATUS_ASSIGNMENT_DELAYED = 5
#: Kafka 4.3 sets neither in its heartbeat answers (the fields' default, 0)
ACCEPTABLE_RECOVERY_LAG = 0
TASK_OFFSET_INTERVAL_MS = 0
#: Kafka's topic name rules (Topic.validate): what an internal topic the coordinator creates may be called
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")

#: subtopology id -> task partitions
Tasks = dict[str, set[int]]


class MemberState(enum.IntEnum):
    """Kafka's streams MemberState (its record byte)."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class TaskSets:
    """Active, standby and warm-up tasks (Kafka's TasksTuple)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def copy(self) -> TaskSets:
        return TaskSets(_copy(self.active), _copy(self.standby), _copy(self.warmup))

    def is_empty(self) -> bool:
        return not (_nonempty(self.active) or _nonempty(self.standby) or _nonempty(self.warmup))

    def record(self) -> dict[str, Any]:
        return {"active_tasks": _to_record(self.active), "standby_tasks": _to_record(self.standby),
                "warmup_tasks": _to_record(self.warmup)}

    @classmethod
    def from_record(cls, value: Mapping[str, Any], suffix: str = "") -> TaskSets:
        return cls(_from_record(value["active_tasks" + suffix]), _from_record(value["standby_tasks" + suffix]),
                   _from_record(value["warmup_tasks" + suffix]))

    def normalized(self) -> TaskSets:
        return TaskSets(_clean(self.active), _clean(self.standby), _clean(self.warmup))


def _copy(tasks: Tasks) -> Tasks:
    return {s: set(ps) for s, ps in tasks.items()}


def _clean(tasks: Tasks) -> Tasks:
    return {s: set(ps) for s, ps in tasks.items() if ps}


def _nonempty(tasks: Tasks) -> bool:
    return any(tasks.values())


def _to_record(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps]


def _from_record(items: Any) -> Tasks:
    return {i["subtopology_id"]: set(i["partitions"]) for i in items or [] if i["partitions"]}


def _from_request(items: Any) -> Tasks | None:
    if items is None:
        return None
    out: Tasks = {}
    for t in items:
        out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return out


def _task_ids(tasks: Tasks) -> list[Struct]:
    return [Struct(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def _minus(a: Tasks, b: Tasks) -> Tasks:
    return _clean({s: ps - b.get(s, set()) for s, ps in a.items()})


def _intersect(a: Tasks, b: Tasks) -> Tasks:
    return _clean({s: ps & b.get(s, set()) for s, ps in a.items()})


def _union(a: Tasks, b: Tasks) -> Tasks:
    out = _copy(a)
    for s, ps in b.items():
        out.setdefault(s, set()).update(ps)
    return _clean(out)


@dataclass
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TaskSets = field(default_factory=TaskSets)
    pending_revocation: TaskSets = field(default_factory=TaskSets)
    #: the changelog offsets the member last reported (StreamsGroupDescribe shows them; not persisted, as in Kafka)
    task_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    task_end_offsets: list[tuple[str, int, int]] = field(default_factory=list)

    def metadata_value(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "rack_id": self.rack_id, "client_id": self.client_id,
                "client_host": self.client_host, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "topology_epoch": self.topology_epoch, "process_id": self.process_id,
                "user_endpoint": None if self.user_endpoint is None else
                {"host": self.user_endpoint[0], "port": self.user_endpoint[1]},
                "client_tags": [{"key": k, "value": v} for k, v in sorted(self.client_tags.items())]}

    def metadata_equals(self, other: StreamsMember) -> bool:
        return self.metadata_value() == other.metadata_value()

    def assignment_value(self) -> dict[str, Any]:
        pending = self.pending_revocation.record()
        return {"member_epoch": self.member_epoch, "previous_member_epoch": self.previous_member_epoch,
                "state": int(self.state), **self.assigned.record(),
                **{k + "_pending_revocation": v for k, v in pending.items()}}

    def assignment_key(self) -> tuple[Any, ...]:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned.normalized(),
                self.pending_revocation.normalized())


@dataclass
class ConfiguredSubtopology:
    """A subtopology against the current topics: its task count and the topics a task reads."""

    num_tasks: int
    source_topics: list[str]
    repartition_source_topics: list[str]
    #: whether its tasks have state (changelog topics): only those get standby tasks, as in Kafka
    stateful: bool = False


@dataclass
class ConfiguredTopology:
    """Kafka's ConfiguredTopology: the subtopologies when the topology is ready, else the status explaining why
    not, and the internal topics to create (name -> (partitions, replication factor, configs))."""

    epoch: int
    subtopologies: dict[str, ConfiguredSubtopology] | None
    internal_topics_to_create: dict[str, tuple[int, int, dict[str, str]]]
    status: tuple[int, str] | None = None

    @property
    def ready(self) -> bool:
        return self.subtopologies is not None and not self.internal_topics_to_create and self.status is None


class StreamsGroup(ModernGroup[StreamsMember]):
    group_type = "streams"
    protocol_type = "streams"
    record_types = GroupRecordTypes(
        metadata=R.STREAMS_GROUP_METADATA, target_assignment_metadata=R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
        target_assignment_member=R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
        member_metadata=R.STREAMS_GROUP_MEMBER_METADATA,
        current_member_assignment=R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_extra=R.STREAMS_GROUP_TOPOLOGY)
    derived_indexes = ("active_owner",)

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        #: the StreamsGroupTopologyValue (snake_case dict) the first member initialized, or None
        self.topology: dict[str, Any] | None = None
        self.configured: ConfiguredTopology | None = None
        self.target: dict[str, TaskSets] = {}
        #: (subtopology, partition) -> member owning it as an active task (assigned or pending revocation)
        self.active_owner: dict[tuple[str, int], str] = {}
        #: bumped whenever the tasks members hold change: members asking with an older epoch get the endpoints
        self.endpoint_information_epoch = 0
        self.shutdown_requested_by: str | None = None
        #: the first target assignment of a new group waits group.streams.initial.rebalance.delay.ms (Kafka 4.3)
        self.assignment_not_before = 0

    # -- state ------------------------------------------------------------------------------------------------
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def source_topics(self) -> set[str]:
        if self.topology is None:
            return set()
        out: set[str] = set()
        for sub in self.topology["subtopologies"]:
            out.update(sub["source_topics"])
            out.update(t["name"] for t in sub["repartition_source_topics"])
        return out

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return bool(self.members) and topic in self.source_topics()

    # -- members ----------------------------------------------------------------------------------------------
    def put_member(self, member: StreamsMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        for tasks in (member.assigned.active, member.pending_revocation.active):
            for s, ps in tasks.items():
                for p in ps:
                    self.active_owner[(s, p)] = member.member_id

    def remove_member(self, member_id: str) -> StreamsMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
        self.target.pop(member_id, None)
        return member

    def _release(self, member: StreamsMember) -> None:
        for tasks in (member.assigned.active, member.pending_revocation.active):
            for s, ps in tasks.items():
                for p in ps:
                    if self.active_owner.get((s, p)) == member.member_id:
                        del self.active_owner[(s, p)]

    # -- offsets and deletion (the Group interface shared with the other group types) --------------------------
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int = 9, *, transactional: bool = False) -> None:
        if generation < 0 and not self.members:
            return   # an admin commit on an empty group (Kafka: memberEpoch -1 and no member id)
        if not member_id and generation < 0:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)


# -- topology configuration (Kafka's InternalTopicManager / RepartitionTopics) ---------------------------------

def _topic_configs(info: Mapping[str, Any]) -> dict[str, str]:
    return {c["key"]: c["value"] for c in info.get("topic_configs", [])}


def configure_topology(topology: Mapping[str, Any], catalog: TopicCatalog) -> ConfiguredTopology:
    """The topology against the current topics: tasks per subtopology, internal topics still to create, or the
    status that keeps the group from being assigned (missing or incorrectly partitioned topics)."""
    epoch = topology["epoch"]
    subs = topology["subtopologies"]
    counts = {name: n for name, (_, n) in catalog.by_name.items()}
    missing = sorted({t for sub in subs for t in sub["source_topics"] if t not in counts})
    regex_sources: dict[str, list[str]] = {}
    for sub in subs:
        matched: set[str] = set()
        for rx in sub["source_topic_regex"]:
            try:
                pattern = re.compile(rx)
            except re.error:
                continue
            matched.update(n for n in counts if pattern.fullmatch(n) and not n.startswith("__"))
        regex_sources[sub["subtopology_id"]] = sorted(matched)
        if sub["source_topic_regex"] and not matched and not sub["source_topics"]:
            missing.extend(sub["source_topic_regex"])
    if missing:
        return ConfiguredTopology(epoch, None, {}, (STATUS_MISSING_SOURCE_TOPICS,
                                                    f"Source topics {', '.join(missing)} are missing."))
    # repartition topics: an explicit count, else the largest count of the subtopologies writing to them
    repartition: dict[str, int] = {}
    for sub in subs:
        for info in sub["repartition_source_topics"]:
            if info["partitions"] > 0:
                repartition[info["name"]] = info["partitions"]
    writers: dict[str, list[Mapping[str, Any]]] = {}
    for sub in subs:
        for sink in sub["repartition_sink_topics"]:
            writers.setdefault(sink, []).append(sub)
    for _ in range(len(subs) + 1):   # a fixed point within one pass per subtopology (no cycles in a topology)
        progress = False
        for sub in subs:
            for info in sub["repartition_source_topics"]:
                name = info["name"]
                if name in repartition:
                    continue
                best = 0
                for writer in writers.get(name, []):
                    inputs = [counts.get(t, repartition.get(t, 0)) for t in writer["source_topics"]] + \
                        [counts.get(t, 0) for t in regex_sources[writer["subtopology_id"]]] + \
                        [repartition.get(i["name"], 0) for i in writer["repartition_source_topics"]]
                    best = max([best, *inputs])
                if best > 0:
                    repartition[name] = best
                    progress = True
        if not progress:
            break
    unresolved = sorted({i["name"] for sub in subs for i in sub["repartition_source_topics"]} - set(repartition))
    if unresolved:
        return ConfiguredTopology(epoch, None, {}, (
            STATUS_INCORRECTLY_PARTITIONED_TOPICS,
            "Failed to compute number of partitions for all repartition topics, because a repartition source "
            "topic is never used as a sink topic."))
    configured: dict[str, ConfiguredSubtopology] = {}
    #: in the topology's order (subtopologies, then repartition before changelog topics), as Kafka reports them
    to_create: dict[str, tuple[int, int, dict[str, str]]] = {}
    wrong: list[str] = []
    for sub in subs:
        sources = list(sub["source_topics"]) + regex_sources[sub["subtopology_id"]]
        rsources = [i["name"] for i in sub["repartition_source_topics"]]
        num_tasks = max([counts[t] for t in sources] + [repartition[t] for t in rsources] + [0])
        configured[sub["subtopology_id"]] = ConfiguredSubtopology(num_tasks, sources, rsources,
                                                                  bool(sub["state_changelog_topics"]))
        for group in sub["copartition_groups"]:
            names = [sub["source_topics"][i] for i in group["source_topics"] if i < len(sub["source_topics"])] + \
                [rsources[i] for i in group["repartition_source_topics"] if i < len(rsources)]
            sizes = {counts.get(n, repartition.get(n)) for n in names}
            if len(sizes) > 1:
                wrong.append(f"Following topics do not have the same number of partitions: [{', '.join(names)}]")
        internal = [(i, repartition[i["name"]]) for i in sub["repartition_source_topics"]] + \
            [(i, num_tasks) for i in sub["state_changelog_topics"]]
        for info, partitions in internal:
            name = info["name"]
            have = counts.get(name)
            if have is None:
                to_create[name] = (partitions, info["replication_factor"] or -1, _topic_configs(info))
            elif have != partitions:
                wrong.append(f"Number of partitions [{have}] of internal topic [{name}] doesn't match the "
                             f"expected number of partitions [{partitions}].")
    if wrong:
        return ConfiguredTopology(epoch, None, {}, (STATUS_INCORRECTLY_PARTITIONED_TOPICS, "; ".join(wrong)))
    status = None
    if to_create:
        status = (STATUS_MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {', '.join(to_create)}")
    return ConfiguredTopology(epoch, configured, to_create, status)


def topology_from_request(topology: Any) -> dict[str, Any]:
    """The heartbeat's Topology as a StreamsGroupTopologyValue (Kafka's convertToStreamsGroupTopologyRecord)."""
    def info(items: Any) -> list[dict[str, Any]]:
        return [{"name": i.name, "partitions": i.partitions, "replication_factor": i.replication_factor,
                 "topic_configs": [{"key": c.key, "value": c.value} for c in i.topic_configs]}
                for i in sorted(items, key=lambda i: i.name)]

    return {"epoch": topology.epoch, "subtopologies": [
        {"subtopology_id": s.subtopology_id, "source_topics": sorted(s.source_topics),
         "source_topic_regex": sorted(s.source_topic_regex), "state_changelog_topics": info(s.state_changelog_topics),
         "repartition_sink_topics": sorted(s.repartition_sink_topics),
         "repartition_source_topics": info(s.repartition_source_topics),
         "copartition_groups": [{"source_topics": list(g.source_topics),
                                 "source_topic_regex": list(g.source_topic_regex),
                                 "repartition_source_topics": list(g.repartition_source_topics)}
                                for g in s.copartition_groups]}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id)]}


def validate_topology(topology: Any) -> None:
    """Kafka's TopologyValidation: STREAMS_INVALID_TOPOLOGY for a topology no assignment can be made of."""
    def invalid(msg: str) -> GroupError:
        return GroupError(ErrorCode.STREAMS_INVALID_TOPOLOGY, msg)

    ids = [s.subtopology_id for s in topology.subtopologies]
    if len(set(ids)) != len(ids):
        raise invalid("Duplicate subtopology IDs in the topology.")
    repartition_sources = {i.name for s in topology.subtopologies for i in s.repartition_source_topics}
    for s in topology.subtopologies:
        for sink in s.repartition_sink_topics:
            if sink not in repartition_sources:
                raise invalid(f"Repartition sink topic {sink} is not a repartition source topic of any subtopology.")
        for i in [*s.repartition_source_topics, *s.state_changelog_topics]:
            if not _LEGAL_TOPIC.fullmatch(i.name) or i.name in (".", ".."):
                raise invalid(f"Invalid internal topic name: {i.name}")
        for g in s.copartition_groups:
            if any(i < 0 or i >= len(s.source_topics) for i in g.source_topics) or \
                    any(i < 0 or i >= len(s.repartition_source_topics) for i in g.repartition_source_topics):
                raise invalid(f"Copartition group of subtopology {s.subtopology_id} refers to an unknown topic.")


# -- the sticky task assignor (Kafka's StickyTaskAssignor, its observable rules) --------------------------------

def sticky_assign(members: Mapping[str, StreamsMember], previous: Mapping[str, TaskSets],
                  tasks: Mapping[str, int], num_standby: int,
                  stateful: frozenset[str] | set[str] = frozenset()) -> dict[str, TaskSets]:
    """Active tasks spread evenly over the members (at most ceil(tasks / members) each), each kept by the member
    that had it when that fits; then ``num_standby`` standby copies of each task of a ``stateful`` subtopology on
    members of other processes than its active one (the least loaded first, previous holders preferred), as Kafka's
    sticky assignor (a stateless task has nothing to keep warm). No warm-up tasks. In Kafka's orders: kept tasks by
    partition then subtopology, new ones subtopology by subtopology, so each member gets a share of every
    subtopology as Kafka's do."""
    out = {mid: TaskSets() for mid in members}
    if not members:
        return out
    all_tasks = sorted(((s, p) for s in tasks for p in range(tasks[s])), key=lambda t: (t[1], t[0]))
    order = sorted(members)
    cap = -(-len(all_tasks) // len(members))
    load = {mid: 0 for mid in members}
    placed: dict[tuple[str, int], str] = {}
    for mid in order:   # stickiness: previous active tasks first, within the balanced capacity
        owned = sorted(((s, p) for s, ps in previous.get(mid, TaskSets()).active.items() for p in ps),
                       key=lambda t: (t[1], t[0]))
        for s, p in owned:
            if (s, p) in placed or s not in tasks or p >= tasks[s] or load[mid] >= cap:
                continue
            placed[(s, p)] = mid
            load[mid] += 1
    for task in sorted(all_tasks):   # tasks nobody keeps, subtopology by subtopology, to the least loaded
        if task in placed:
            continue
        mid = min(order, key=lambda m: (load[m], order.index(m)))
        placed[task] = mid
        load[mid] += 1
    for (s, p), mid in placed.items():
        out[mid].active.setdefault(s, set()).add(p)
    if num_standby > 0:
        standby_load = {mid: load[mid] for mid in members}
        for task in all_tasks:
            s, p = task
            if s not in stateful:
                continue
            owner_process = members[placed[task]].process_id
            used = {owner_process}
            for _ in range(num_standby):
                candidates = [m for m in order if members[m].process_id not in used]
                if not candidates:
                    break
                had = [m for m in candidates if p in previous.get(m, TaskSets()).standby.get(s, set())]
                mid = min(had or candidates, key=lambda m: (standby_load[m], order.index(m)))
                out[mid].standby.setdefault(s, set()).add(p)
                standby_load[mid] += 1
                used.add(members[mid].process_id)
    return out


class StreamsGroupManager(ModernGroupManager[StreamsGroup, StreamsMember]):
    """Kafka's streams-group (KIP-1071) logic over the shared group registry."""

    group_class = StreamsGroup
    member_states = MemberState
    kind = "streams"

    def __init__(self, groups: dict[str, Any], timer: Timer, write: Callable[[str, list], None], config: Any,
                 catalog: Callable[[], TopicCatalog], forget_group: Callable[[Any], None],
                 group_configs: Callable[[str], Mapping[str, str]],
                 create_topics: Callable[[dict[str, tuple[int, int, dict[str, str]]]], Awaitable[None]] | None
                 ) -> None:
        super().__init__(groups, timer, write, forget_group, config, group_configs)
        self.catalog = catalog
        self.create_topics = create_topics
        self.max_size = int(config["group.streams.max.size"])
        #: internal topics whose creation is under way (not asked for again meanwhile)
        self.creating: set[str] = set()
        self.assignments_computed = 0

    # -- configs (group configs over the broker's group.streams.*: ModernGroupManager.group_int) ---------------
    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_int(group_id, "streams.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_int(group_id, "streams.heartbeat.interval.ms")

    def num_standby_replicas(self, group_id: str) -> int:
        return min(self.group_int(group_id, "streams.num.standby.replicas"),
                   int(self.config["group.streams.max.standby.replicas"]))

    # -- StreamsGroupHeartbeat ----------------------------------------------------------------------------------
    async def heartbeat(self, request: Any, client_id: str, client_host: str) -> Struct:
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            response, to_create = self._heartbeat(request, client_id, client_host)
        except GroupError as e:
            return _error_response(e.code, e.message)
        if to_create and self.create_topics is not None:
            await self._create_internal_topics(to_create)
        return response

    async def _create_internal_topics(self, topics: dict[str, tuple[int, int, dict[str, str]]]) -> None:
        """Kafka's broker creates the missing internal topics the heartbeat reported; the members see them ready
        at a later heartbeat (their status says MISSING_INTERNAL_TOPICS until then)."""
        wanted = {n: spec for n, spec in topics.items() if n not in self.creating}
        if not wanted or self.create_topics is None:
            return
        self.creating.update(wanted)
        try:
            await self.create_topics(wanted)
        except Exception as exc:  # noqa: BLE001 - the next heartbeat asks again
            log.warning("creating internal topics %s failed: %s", sorted(wanted), exc)
        finally:
            self.creating.difference_update(wanted)

    def _validate(self, request: Any) -> None:
        def invalid(msg: str) -> GroupError:
            return GroupError(ErrorCode.INVALID_REQUEST, msg)

        if not request.group_id:
            raise invalid("GroupId can't be empty.")
        if not request.member_id:
            raise invalid("MemberId can't be empty.")
        if request.instance_id is not None:
            raise invalid("Static members are not supported in streams groups.")
        if request.rack_id is not None and request.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            for name in ("active_tasks", "standby_tasks", "warmup_tasks"):
                value = getattr(request, name)
                if value is None or value:
                    label = {"active_tasks": "ActiveTasks", "standby_tasks": "StandbyTasks",
                             "warmup_tasks": "WarmupTasks"}[name]
                    raise invalid(f"{label} must be empty when (re-)joining.")
            if request.topology is None:
                raise invalid("Topology must be non-null when (re-)joining.")
            if request.process_id is None:
                raise invalid("ProcessId can't be null.")
            validate_topology(request.topology)
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if request.process_id is not None and request.process_id == "":
            raise invalid("ProcessId can't be empty.")

    def _group(self, group_id: str, create: bool, records: list) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            group = StreamsGroup(group_id)
            self.groups[group_id] = group
            return group
        if isinstance(group, StreamsGroup):
            return group
        if create and group.group_type == "classic" and group.is_empty():
            # Kafka converts an empty classic group (e.g. one holding only committed offsets; forgotten once the
            # records are written: a refused write puts it back)
            records.append(R.group_metadata_tombstone(group_id))
            group = StreamsGroup(group_id)
            self.groups[group_id] = group
            log.info("group %s: converted the empty classic group to a streams group", group_id)
            return group
        raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

    def _heartbeat(self, request: Any, client_id: str, client_host: str
                   ) -> tuple[Struct, dict[str, tuple[int, int, dict[str, str]]]]:
        records: list[tuple[bytes, bytes | None]] = []
        epoch = request.member_epoch
        create = epoch == 0
        existing = self.groups.get(request.group_id)
        created = existing is None
        group = self._group(request.group_id, create, records)
        converted_from = None if existing is group else existing   # an empty classic group this heartbeat converts
        member_id = request.member_id
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= self.max_size:
                if converted_from is not None:
                    self.undo_conversion(group, converted_from)
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"The streams group has reached its maximum capacity of {self.max_size} members.")
            member = StreamsMember(member_id)
            log.info("group %s: member %s joins the streams group", group.group_id, member_id)
        elif epoch == 0:
            member = copy.deepcopy(member)   # a member re-joining (after a fencing, say) starts over
            member.member_epoch = 0
        else:
            self._check_epoch(member, epoch, request)
        # the heartbeat changes the group before its records are written: a refused write (or an error half-way)
        # restores it, and its timers move only once written
        prior, reconciled, to_create, delayed = self.change_and_write(
            group, created, records,
            lambda timers: self._heartbeat_apply(group, member, request, client_id, client_host, records, timers),
            converted_from)
        self.schedule_session_timeout(group, member_id)
        if request.shutdown_application:
            group.shutdown_requested_by = member_id

        statuses: list[tuple[int, str]] = []

        # statuses (Kafka's order: the delay, the topology, then the group's)
        if delayed is not None:
            statuses.append((STATUS_ASSIGNMENT_DELAYED, delayed))
        if group.topology is not None and reconciled.topology_epoch < group.topology["epoch"]:
            statuses.append((STATUS_STALE_TOPOLOGY,
                             f"The member's topology epoch {reconciled.topology_epoch} is behind the group's "
                             f"topology epoch {group.topology['epoch']}."))
        if group.configured is not None and group.configured.status is not None:
            statuses.append(group.configured.status)
        if group.shutdown_requested_by is not None:
            statuses.append((STATUS_SHUTDOWN_APPLICATION,
                             f"The application shutdown was requested by member {group.shutdown_requested_by}."))

        full = epoch == 0
        changed = prior is None or reconciled.assigned.normalized() != prior.assigned.normalized()
        send_tasks = full or changed
        endpoints = None
        if request.endpoint_information_epoch != group.endpoint_information_epoch:
            endpoints = self._endpoints(group)
        response = Struct(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
            member_epoch=reconciled.member_epoch, heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG, task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
            status=[Struct(status_code=c, status_detail=d) for c, d in statuses],
            active_tasks=_task_ids(reconciled.assigned.active) if send_tasks else None,
            standby_tasks=_task_ids(reconciled.assigned.standby) if send_tasks else None,
            warmup_tasks=_task_ids(reconciled.assigned.warmup) if send_tasks else None,
            endpoint_information_epoch=group.endpoint_information_epoch, partitions_by_user_endpoint=endpoints)
        return response, to_create

    def _heartbeat_apply(self, group: StreamsGroup, member: StreamsMember, request: Any, client_id: str,
                         client_host: str, records: list, timers: list[Callable[[], None]]
                         ) -> tuple[StreamsMember | None, StreamsMember, dict[str, tuple[int, int, dict[str, str]]],
                                    str | None]:
        """A heartbeat's change of ``group`` (records appended, timer changes to ``timers`` for once they are
        written): (the member before, after; the internal topics to create; why the assignment waits)."""
        member_id = request.member_id
        is_new = member_id not in group.members
        bump = is_new

        # 1. the topology: the first member initializes it, later ones must match it
        if request.topology is not None:
            incoming = topology_from_request(request.topology)
            if group.topology is None or (not group.members and group.topology != incoming):
                group.topology = incoming
                group.configured = None
                records.append(R.consumer_group_record(R.STREAMS_GROUP_TOPOLOGY, {"group_id": group.group_id},
                                                       incoming))
                log.info("group %s: member %s initialized the topology with epoch %d", group.group_id, member_id,
                         incoming["epoch"])
                bump = True
            elif incoming["epoch"] < group.topology["epoch"]:
                pass   # a stale topology: reported below
            elif incoming != group.topology:
                raise GroupError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")

        updated = copy.deepcopy(member)
        if request.rack_id is not None:
            updated.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.topology is not None:
            updated.topology_epoch = request.topology.epoch
        if request.process_id is not None:
            updated.process_id = request.process_id
        if request.user_endpoint is not None:
            updated.user_endpoint = (request.user_endpoint.host, request.user_endpoint.port)
        if request.client_tags is not None:
            updated.client_tags = {kv.key: kv.value for kv in request.client_tags}
        if request.task_offsets is not None:
            updated.task_offsets = [(o.subtopology_id, o.partition, o.offset) for o in request.task_offsets]
        if request.task_end_offsets is not None:
            updated.task_end_offsets = [(o.subtopology_id, o.partition, o.offset) for o in request.task_end_offsets]
        updated.client_id = client_id
        updated.client_host = client_host
        if is_new or not updated.metadata_equals(member):
            records.append(R.consumer_group_record(R.STREAMS_GROUP_MEMBER_METADATA,
                                                   {"group_id": group.group_id, "member_id": member_id},
                                                   updated.metadata_value()))
            if not is_new and (updated.process_id, updated.user_endpoint, updated.client_tags, updated.rack_id,
                               updated.topology_epoch) != (member.process_id, member.user_endpoint,
                                                           member.client_tags, member.rack_id, member.topology_epoch):
                bump = True

        # 2. the topology against the current topics (a changed partition count starts a new epoch)
        catalog = self.catalog()
        to_create: dict[str, tuple[int, int, dict[str, str]]] = {}
        if group.topology is not None:
            configured = configure_topology(group.topology, catalog)
            to_create = configured.internal_topics_to_create
            topics = {n: catalog.by_name[n][1] for n in _topology_topics(group.topology) if n in catalog.by_name}
            new_hash = metadata_hash(topics)
            if new_hash != group.metadata_hash or group.configured is None or \
                    group.configured.ready != configured.ready:
                bump = True
            group.configured = configured
            group.metadata_hash = new_hash
            if configured.ready:
                group.validated_topology_epoch = configured.epoch
        if bump:
            group.group_epoch += 1
            records.append(R.consumer_group_record(R.STREAMS_GROUP_METADATA, {"group_id": group.group_id},
                                                   self._metadata_value(group)))
            log.info("group %s: streams group epoch bumped to %d", group.group_id, group.group_epoch)
            if group.assignment_epoch == 0 and not group.members:
                delay = self.group_int(group.group_id, "streams.initial.rebalance.delay.ms")
                group.assignment_not_before = self.timer.now() + delay

        prior = group.members.get(member_id)
        group.put_member(updated)

        # 3. a new target assignment when the group epoch moved past the assignment epoch
        # (a topology not ready yet assigns no task, at a new epoch all the same, as Kafka does; a new group's
        # members join at an epoch without tasks until its initial rebalance delay is over, then a new epoch
        # brings the tasks; an assignment comes at most once per streams.assignment.interval.ms, the group staying
        # Assigning meanwhile)
        now = self.timer.now()
        delayed: str | None = None
        if now < group.assignment_not_before:
            delayed = "Assignment delayed due to the configured initial rebalance delay."
            if group.group_epoch > group.assignment_epoch:
                self._update_target_assignment(group, records, empty=True)
                timers.append(lambda: self._schedule_delayed_assignment(group))
        elif group.group_epoch > group.assignment_epoch:
            interval = self.group_int(group.group_id, "streams.assignment.interval.ms")
            if not assignment_due(group.last_assignment_ms, interval, now):
                assert group.last_assignment_ms is not None
                delayed = "Assignment delayed due to the configured assignment interval."
                wait = group.last_assignment_ms + interval - now
                timers.append(lambda: self._schedule_interval_assignment(group, wait))
            else:
                self._update_target_assignment(group, records)

        # 4. the member's reconciliation towards its target
        owned = _owned_from_request(request)
        reconciled = self._reconcile(group, updated, group.target.get(member_id, TaskSets()), owned)
        if prior is None or reconciled.assignment_key() != prior.assignment_key() or is_new:
            records.append(R.consumer_group_record(R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                                   {"group_id": group.group_id, "member_id": member_id},
                                                   reconciled.assignment_value()))
            if prior is None or reconciled.assigned.normalized() != prior.assigned.normalized():
                group.endpoint_information_epoch += 1
            if reconciled.state is MemberState.UNREVOKED_TASKS:
                timers.append(lambda: self.schedule_rebalance_timeout(group, reconciled))
            else:
                timers.append(lambda: self.cancel_rebalance_timeout(group.group_id, member_id))
        group.put_member(reconciled)
        return prior, reconciled, to_create, delayed

    @staticmethod
    def _metadata_value(group: StreamsGroup) -> dict[str, Any]:
        return {"epoch": group.group_epoch, "metadata_hash": group.metadata_hash,
                "validated_topology_epoch": group.validated_topology_epoch, "last_assignment_configs": None}

    @staticmethod
    def _check_epoch(member: StreamsMember, received: int, request: Any) -> None:
        if received > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The streams group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "tasks and rejoin.")
        if received < member.member_epoch:
            owned = _owned_from_request(request)
            subset = owned is not None and all(
                _minus(getattr(owned, kind), getattr(member.assigned, kind)) == {}
                for kind in ("active", "standby", "warmup"))
            if received != member.previous_member_epoch or not subset:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The streams group member has a smaller member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 "all its tasks and rejoin.")

    def _schedule_delayed_assignment(self, group: StreamsGroup) -> None:
        gid = group.group_id

        def compute() -> None:
            g = self.groups.get(gid)
            if isinstance(g, StreamsGroup) and g.members:
                # the delay is over: a new epoch with the real assignment
                g.group_epoch += 1
                records: list[tuple[bytes, bytes | None]] = [R.consumer_group_record(
                    R.STREAMS_GROUP_METADATA, {"group_id": gid}, self._metadata_value(g))]
                self._update_target_assignment(g, records)
                try:
                    self.write(gid, records)
                except GroupError:
                    pass   # the next heartbeat computes it again

        delay = max(0, group.assignment_not_before - self.timer.now())
        if not self.timer.is_scheduled(("streams-initial-assignment", gid)):
            self.timer.schedule(("streams-initial-assignment", gid), delay, compute)

    def _schedule_interval_assignment(self, group: StreamsGroup, delay_ms: int) -> None:
        """The assignment a bump within the assignment interval deferred, computed when the interval is over."""
        gid = group.group_id

        def compute() -> None:
            g = self.groups.get(gid)
            if isinstance(g, StreamsGroup) and g.group_epoch > g.assignment_epoch:
                records: list[tuple[bytes, bytes | None]] = []
                self._update_target_assignment(g, records)
                try:
                    self.write(gid, records)
                except GroupError:
                    g.last_assignment_ms = None   # the next heartbeat computes it again

        if not self.timer.is_scheduled(("streams-interval-assignment", gid)):
            self.timer.schedule(("streams-interval-assignment", gid), delay_ms, compute)

    def _update_target_assignment(self, group: StreamsGroup, records: list, *, empty: bool = False) -> None:
        configured = group.configured
        tasks = {s: c.num_tasks for s, c in configured.subtopologies.items()} \
            if not empty and configured is not None and configured.ready and configured.subtopologies is not None \
            else {}
        previous = {mid: _union_sets(m.assigned, group.target.get(mid)) for mid, m in group.members.items()}
        stateful = {s for s, c in configured.subtopologies.items() if c.stateful} \
            if configured is not None and configured.subtopologies is not None else set()
        new = sticky_assign(group.members, previous, tasks, self.num_standby_replicas(group.group_id), stateful)
        self.assignments_computed += 1
        for mid in group.members:
            target = new.get(mid, TaskSets()).normalized()
            old = group.target.get(mid)
            if old is None or old.normalized() != target:
                records.append(R.consumer_group_record(
                    R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, {"group_id": group.group_id, "member_id": mid},
                    target.record()))
            group.target[mid] = target
        group.assignment_epoch = group.group_epoch
        group.last_assignment_ms = self.timer.now()
        records.append(R.consumer_group_record(R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
                                               {"group_id": group.group_id},
                                               {"assignment_epoch": group.assignment_epoch,
                                                "assignment_timestamp": self.timer.now()}))
        log.info("group %s: computed the streams target assignment for epoch %d", group.group_id,
                 group.assignment_epoch)

    # -- reconciliation (Kafka's streams CurrentAssignmentBuilder) ---------------------------------------------
    def _reconcile(self, group: StreamsGroup, member: StreamsMember, target: TaskSets,
                   owned: TaskSets | None) -> StreamsMember:
        epoch = group.assignment_epoch
        if member.state is MemberState.STABLE and member.member_epoch == epoch:
            return member
        if member.state is MemberState.UNREVOKED_TASKS:
            if owned is None or _owns_any(owned, member.pending_revocation):
                return member
            return self._next(group, member, member.member_epoch, epoch, target, revoked=True)
        return self._next(group, member, member.member_epoch, epoch, target, revoked=False)

    def _next(self, group: StreamsGroup, member: StreamsMember, member_epoch: int, target_epoch: int,
              target: TaskSets, *, revoked: bool) -> StreamsMember:
        cur = member.assigned
        revoke = TaskSets(_minus(cur.active, target.active), _minus(cur.standby, target.standby),
                          _minus(cur.warmup, target.warmup))
        out = copy.deepcopy(member)
        if not revoked and not revoke.is_empty():
            out.state = MemberState.UNREVOKED_TASKS
            out.assigned = TaskSets(_intersect(cur.active, target.active), _intersect(cur.standby, target.standby),
                                    _intersect(cur.warmup, target.warmup))
            out.pending_revocation = revoke
            return out
        # new active tasks wait until their previous owner released them
        active: Tasks = _copy(_intersect(cur.active, target.active))
        unreleased = False
        for s, ps in target.active.items():
            for p in ps:
                owner = group.active_owner.get((s, p))
                if owner is None or owner == member.member_id:
                    active.setdefault(s, set()).add(p)
                else:
                    unreleased = True
        out.assigned = TaskSets(_clean(active), _copy(target.standby), _copy(target.warmup))
        out.pending_revocation = TaskSets()
        out.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        if target_epoch != out.member_epoch:
            out.previous_member_epoch = out.member_epoch
            out.member_epoch = target_epoch
        return out

    # -- leaving, fencing and timers ------------------------------------------------------------------------------
    def _leave(self, request: Any) -> Struct:
        group = self.groups.get(request.group_id)
        if not isinstance(group, StreamsGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {request.group_id} not found.")
        member = group.members.get(request.member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {request.member_id} is not a member of group {group.group_id}.")
        log.info("group %s: member %s left the streams group", group.group_id, member.member_id)
        self.fence_member(group, member)
        return Struct(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                      member_id=request.member_id, member_epoch=request.member_epoch, heartbeat_interval_ms=0,
                      acceptable_recovery_lag=0, task_offset_interval_ms=0, status=None, active_tasks=None,
                      standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
                      partitions_by_user_endpoint=None)

    def fence_member(self, group: StreamsGroup, member: StreamsMember) -> None:
        # written first: a refused write leaves the member in (and its timers: a timer's fencing tries again)
        records = StreamsGroup.record_types.member_tombstones(group.group_id, member.member_id)
        records.append(R.consumer_group_record(R.STREAMS_GROUP_METADATA, {"group_id": group.group_id},
                                               {**self._metadata_value(group), "epoch": group.group_epoch + 1}))
        self.write(group.group_id, records)
        group.remove_member(member.member_id)
        group.group_epoch += 1
        group.endpoint_information_epoch += 1
        if not group.members:
            group.shutdown_requested_by = None
        self.cancel_timers(group, member.member_id)

    def member_session_timeout_ms(self, group: StreamsGroup, member: StreamsMember | None) -> int:
        return self.session_timeout_ms(group.group_id)

    def still_revoking(self, member: StreamsMember, epoch: int) -> bool:
        return member.member_epoch == epoch and member.state is MemberState.UNREVOKED_TASKS

    def forget(self, group: StreamsGroup) -> None:
        super().forget(group)
        self.timer.cancel(("streams-initial-assignment", group.group_id))
        self.timer.cancel(("streams-interval-assignment", group.group_id))

    # -- IQ endpoints ----------------------------------------------------------------------------------------------
    def _endpoints(self, group: StreamsGroup) -> list[Struct]:
        """Each member endpoint's topic partitions of its active and standby tasks (the input partitions of the
        tasks: source and repartition source topics), for Interactive Queries."""
        subs = group.configured.subtopologies if group.configured is not None else None
        out = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            if m.user_endpoint is None:
                continue

            def partitions(tasks: Tasks) -> list[Struct]:
                by_topic: dict[str, set[int]] = {}
                for s, ps in tasks.items():
                    sub = None if subs is None else subs.get(s)
                    if sub is None:
                        continue
                    for t in sub.source_topics + sub.repartition_source_topics:
                        by_topic.setdefault(t, set()).update(ps)
                return [Struct(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]

            out.append(Struct(user_endpoint=Struct(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                              active_partitions=partitions(m.assigned.active),
                              standby_partitions=partitions(m.assigned.standby)))
        return out

    # -- StreamsGroupDescribe ------------------------------------------------------------------------------------
    def describe(self, group_id: str) -> Struct:
        if not group_id:
            return described_error(group_id, ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
        group = self.groups.get(group_id)
        if group is None:
            return described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, StreamsGroup):
            return described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                   f"Group {group_id} is not a streams group.")
        topology = None
        if group.topology is not None:
            subtopologies = None
            if group.configured is not None and group.configured.subtopologies is not None:
                subtopologies = []
                for sub in group.topology["subtopologies"]:
                    conf = group.configured.subtopologies.get(sub["subtopology_id"])
                    sources = conf.source_topics if conf is not None else list(sub["source_topics"])
                    subtopologies.append(Struct(
                        subtopology_id=sub["subtopology_id"], source_topics=sources,
                        repartition_sink_topics=list(sub["repartition_sink_topics"]),
                        state_changelog_topics=_describe_topics(sub["state_changelog_topics"], conf, changelog=True),
                        repartition_source_topics=_describe_topics(sub["repartition_source_topics"], conf,
                                                                   changelog=False, catalog=self.catalog())))
            topology = Struct(epoch=group.topology["epoch"], subtopologies=subtopologies)

        def assignment(tasks: TaskSets) -> Struct:
            return Struct(active_tasks=_task_ids(tasks.active), standby_tasks=_task_ids(tasks.standby),
                          warmup_tasks=_task_ids(tasks.warmup))

        def offsets(items: list[tuple[str, int, int]]) -> list[Struct]:
            return [Struct(subtopology_id=s, partition=p, offset=o) for s, p, o in items]

        members = [Struct(member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
                          rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                          topology_epoch=m.topology_epoch, process_id=m.process_id,
                          user_endpoint=None if m.user_endpoint is None else
                          Struct(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                          client_tags=[Struct(key=k, value=v) for k, v in sorted(m.client_tags.items())],
                          task_offsets=offsets(m.task_offsets), task_end_offsets=offsets(m.task_end_offsets),
                          assignment=assignment(m.assigned),
                          target_assignment=assignment(group.target.get(m.member_id, TaskSets())), is_classic=False)
                   for m in group.members.values()]
        return Struct(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                      group_state=group.state_name(), group_epoch=group.group_epoch,
                      assignment_epoch=group.assignment_epoch, topology=topology, members=members,
                      authorized_operations=-2147483648)

    # -- loading ----------------------------------------------------------------------------------------------
    def replay(self, rec: R.CoordinatorRecord) -> None:
        """Applies one streams-group record, in log order (later records win; tombstones delete)."""
        self.replay_one(rec)

    def apply_group_metadata(self, group: StreamsGroup, value: dict[str, Any]) -> None:
        group.group_epoch = value["epoch"]
        group.metadata_hash = value["metadata_hash"]
        group.validated_topology_epoch = value.get("validated_topology_epoch", -1)

    def replay_other(self, group: StreamsGroup, rec: R.CoordinatorRecord) -> None:
        if rec.type == R.STREAMS_GROUP_TOPOLOGY:
            group.topology = rec.value

    def new_member(self, member_id: str) -> StreamsMember:
        return StreamsMember(member_id)

    def target_from_record(self, value: dict[str, Any]) -> TaskSets:
        return TaskSets.from_record(value)

    def apply_member_metadata(self, member: StreamsMember, value: dict[str, Any]) -> None:
        member.instance_id = value["instance_id"]
        member.rack_id = value["rack_id"]
        member.client_id = value["client_id"]
        member.client_host = value["client_host"]
        member.rebalance_timeout_ms = value["rebalance_timeout_ms"]
        member.topology_epoch = value["topology_epoch"]
        member.process_id = value["process_id"]
        endpoint = value["user_endpoint"]
        member.user_endpoint = None if endpoint is None else (endpoint["host"], endpoint["port"])
        member.client_tags = {kv["key"]: kv["value"] for kv in value["client_tags"]}

    def empty_assignment(self) -> tuple[TaskSets, TaskSets]:
        return TaskSets(), TaskSets()

    def assignment_from_record(self, value: dict[str, Any]) -> tuple[TaskSets, TaskSets]:
        return TaskSets.from_record(value), TaskSets.from_record(value, "_pending_revocation")

    def on_loaded(self, group: StreamsGroup) -> None:
        if group.topology is not None:
            group.configured = configure_topology(group.topology, self.catalog())
        for member in group.members.values():
            self.schedule_session_timeout(group, member.member_id)
            if member.state is MemberState.UNREVOKED_TASKS:
                self.schedule_rebalance_timeout(group, member)


def _topology_topics(topology: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()
    for sub in topology["subtopologies"]:
        out.update(sub["source_topics"])
        out.update(t["name"] for t in sub["repartition_source_topics"])
        out.update(t["name"] for t in sub["state_changelog_topics"])
    return out


def _describe_topics(items: list[dict[str, Any]], conf: ConfiguredSubtopology | None, *, changelog: bool,
                     catalog: TopicCatalog | None = None) -> list[Struct]:
    out = []
    for i in items:
        partitions = i["partitions"]
        if changelog and conf is not None:
            partitions = conf.num_tasks
        elif not changelog and catalog is not None and i["name"] in catalog.by_name:
            partitions = catalog.by_name[i["name"]][1]
        out.append(Struct(name=i["name"], partitions=partitions, replication_factor=i["replication_factor"],
                          topic_configs=[Struct(key=c["key"], value=c["value"]) for c in i["topic_configs"]]))
    return out


def _union_sets(a: TaskSets, b: TaskSets | None) -> TaskSets:
    if b is None:
        return a
    return TaskSets(_union(a.active, b.active), _union(a.standby, b.standby), _union(a.warmup, b.warmup))


def _owned_from_request(request: Any) -> TaskSets | None:
    """The tasks the member reports owning, or None when it did not say (all three lists null: unchanged)."""
    active, standby, warmup = (_from_request(request.active_tasks), _from_request(request.standby_tasks),
                               _from_request(request.warmup_tasks))
    if active is None and standby is None and warmup is None:
        return None
    return TaskSets(active or {}, standby or {}, warmup or {})


def _owns_any(owned: TaskSets, tasks: TaskSets) -> bool:
    return any(_intersect(getattr(owned, k), getattr(tasks, k)) for k in ("active", "standby", "warmup"))


def _error_response(code: int, message: str | None) -> Struct:
    return Struct(throttle_time_ms=0, error_code=int(code), error_message=message, member_id="", member_epoch=-1,
                  heartbeat_interval_ms=0, acceptable_recovery_lag=0, task_offset_interval_ms=0, status=None,
                  active_tasks=None, standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
                  partitions_by_user_endpoint=None)


def described_error(group_id: str, code: int, message: str | None) -> Struct:
    return Struct(error_code=int(code), error_message=message, group_id=group_id, group_state="", group_epoch=0,
                  assignment_epoch=0, topology=None, members=[], authorized_operations=-2147483648)
