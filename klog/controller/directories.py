"""Log directories on the active controller (JBOD, KIP-858), pure: which dir a new replica is placed in, a broker's
AssignReplicasToDirs (73), and the log dirs a broker reports offline in its heartbeat.

Kafka's rules (``ClusterControlManager.defaultDir``, ``ReplicationControlManager.handleAssignReplicasToDirs`` and
``handleDirectoriesOffline``), from metadata.version 3.7-IV2 on:

- A broker registers the ``directory.id`` of each of its online log dirs (``meta.properties``). A replica placed on
  a broker is recorded in the broker's only dir when it has one, as MIGRATING when it registered none, and as
  UNASSIGNED when it has several: the broker makes the log in one of them and says which with AssignReplicasToDirs.
- AssignReplicasToDirs sets the dir of the broker's replica of each partition listed (UNKNOWN_TOPIC_ID,
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER for a partition the broker holds no replica of); a dir that is
  not among the broker's online ones takes the replica out of the ISR and its leadership, as a failure does.
- A heartbeat naming offline dirs that the registration still lists as online: every replica of the broker in one of
  them leaves the ISR and its leaderships move to another ISR member (the partition goes offline, leader -1, when
  there is none), then a BrokerRegistrationChangeRecord lists the dirs left online. The broker goes on serving the
  rest. A replica in an offline dir is never elected leader (Kafka's LeaderAcceptor).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from klog.metadata.image import (
    MIGRATING_DIRECTORY,
    UNASSIGNED_DIRECTORY,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode

from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AssignReplicasToDirsRequest,
        AssignReplicasToDirsResponse,
        AssignReplicasToDirsResponseDirectoryData,
        AssignReplicasToDirsResponsePartitionData,
        AssignReplicasToDirsResponseTopicData,
    )

__all__ = ["MV_DIRECTORY_ASSIGNMENT", "assign_replicas_to_dirs", "default_dir", "directories_offline",
           "dir_online", "placement_directories"]

log = logging.getLogger("klog.controller.directories")

#: metadata.version 3.7-IV2: replicas' log dirs in partition records, AssignReplicasToDirs, offline log dirs in
#: heartbeats (Kafka's ``isDirectoryAssignmentSupported``).
MV_DIRECTORY_ASSIGNMENT = 17

#: Callback types the caller (ClusterControlManager) supplies: may this broker lead, and the leader/ISR records
#: that take ``remove`` out of the given partitions.
LeaderAndIsr = Callable[[Iterator[tuple[TopicImage, int, PartitionRegistration]], int], list[MetadataRecord]]


def assignment_supported(image: MetadataImage) -> bool:
    return (image.metadata_version or 0) >= MV_DIRECTORY_ASSIGNMENT


def default_dir(image: MetadataImage, broker_id: int) -> uuid.UUID:
    """Kafka's ``ClusterControlManager.defaultDir``: the broker's only registered dir, MIGRATING when it registered
    none, UNASSIGNED when it has several (or is not registered)."""
    registration = image.brokers.get(broker_id)
    if registration is None:
        return UNASSIGNED_DIRECTORY
    if not registration.directories:
        return MIGRATING_DIRECTORY
    if len(registration.directories) == 1:
        return registration.directories[0]
    return UNASSIGNED_DIRECTORY


def placement_directories(image: MetadataImage, replicas: Sequence[int],
                          known: dict[int, uuid.UUID] | None = None) -> list[uuid.UUID]:
    """The PartitionRecord/PartitionChangeRecord ``Directories`` for ``replicas``: ``known`` dirs kept, the others
    each broker's default dir; empty (every replica MIGRATING) before metadata.version 3.7-IV2 or when no broker
    tracks dirs."""
    if not assignment_supported(image):
        return []
    dirs = [(known or {}).get(r, default_dir(image, r)) for r in replicas]
    return [] if all(d == MIGRATING_DIRECTORY for d in dirs) else dirs


def dir_online(image: MetadataImage, p: PartitionRegistration, broker_id: int) -> bool:
    """May ``broker_id``'s replica of ``p`` be served: its dir is among the broker's online ones (Kafka's
    ``ClusterControlManager.hasOnlineDir`` in the LeaderAcceptor)."""
    registration = image.brokers.get(broker_id)
    return registration is None or registration.has_online_dir(p.directory(broker_id))


def _in_dirs(image: MetadataImage, broker_id: int, dirs: set[uuid.UUID]
             ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for t in image.topics_by_id.values():
        for pid, p in t.partitions.items():
            if broker_id in p.replicas and p.directory(broker_id) in dirs:
                yield t, pid, p


def directories_offline(image: MetadataImage, broker_id: int, broker_epoch: int, offline: Iterable[uuid.UUID],
                        leader_and_isr: LeaderAndIsr) -> list[MetadataRecord]:
    """Kafka's ``handleDirectoriesOffline``: the records for a heartbeat naming ``offline`` dirs (none when every
    one of them is already offline in the registration)."""
    registration = image.brokers.get(broker_id)
    if registration is None or not assignment_supported(image):
        return []
    offline = set(offline)
    newly = [d for d in registration.directories if d in offline]
    if not newly:
        return []
    records = leader_and_isr(_in_dirs(image, broker_id, set(newly)), broker_id)
    online = [d for d in registration.directories if d not in offline]
    records.append(record("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=broker_epoch,
                          log_dirs=online))
    log.warning("broker %d reported log dir(s) %s offline: %d partition(s) change leader or ISR; online dirs: %s",
                broker_id, ", ".join(str(d) for d in newly), len(records) - 1, ", ".join(str(d) for d in online))
    return records


def _error(code: int) -> ControllerResult[AssignReplicasToDirsResponse]:
    return ControllerResult((), {"throttle_time_ms": 0, "error_code": int(code), "directories": []})


def assign_replicas_to_dirs(request: AssignReplicasToDirsRequest, image: MetadataImage, *, broker_epoch_ok: bool,
                            leader_and_isr: LeaderAndIsr) -> ControllerResult[AssignReplicasToDirsResponse]:
    """Kafka's ``handleAssignReplicasToDirs``. ``broker_epoch_ok``: the request's broker epoch is the broker's
    current one (else STALE_BROKER_EPOCH)."""
    if not assignment_supported(image):
        return _error(ErrorCode.UNSUPPORTED_VERSION)
    broker_id = request.broker_id
    registration = image.brokers.get(broker_id)
    if registration is None:
        return _error(ErrorCode.BROKER_ID_NOT_REGISTERED)
    if not broker_epoch_ok:
        return _error(ErrorCode.STALE_BROKER_EPOCH)
    records: list[MetadataRecord] = []
    # the partitions a dir not online takes offline, in request order
    offline: dict[tuple[uuid.UUID, int], tuple[TopicImage, int]] = {}
    answer_dirs: list[AssignReplicasToDirsResponseDirectoryData] = []
    # one change per partition: a later directory in the request wins, as each record would replace the last
    changed: dict[tuple[uuid.UUID, int], list[uuid.UUID]] = {}
    for directory in request.directories:
        online = registration.has_online_dir(directory.id)
        answer_topics: list[AssignReplicasToDirsResponseTopicData] = []
        for topic in directory.topics:
            t = image.topics_by_id.get(topic.topic_id)
            parts: list[AssignReplicasToDirsResponsePartitionData] = []
            for part in topic.partitions:
                pid = part.partition_index
                if t is None:
                    log.warning("AssignReplicasToDirs from broker %d references unknown topic ID %s", broker_id,
                                topic.topic_id)
                    code = ErrorCode.UNKNOWN_TOPIC_ID
                elif pid not in t.partitions:
                    log.warning("AssignReplicasToDirs from broker %d references unknown partition %s-%d",
                                broker_id, t.name, pid)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif broker_id not in t.partitions[pid].replicas:
                    log.warning("AssignReplicasToDirs from broker %d references non assigned partition %s-%d",
                                broker_id, t.name, pid)
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    code = ErrorCode.NONE
                    p = t.partitions[pid]
                    dirs = changed.get((t.id, pid), list(p.directories))
                    if len(dirs) != len(p.replicas):
                        dirs = [MIGRATING_DIRECTORY] * len(p.replicas)
                    dirs[p.replicas.index(broker_id)] = directory.id
                    changed[(t.id, pid)] = dirs
                    if online:
                        offline.pop((t.id, pid), None)
                    else:
                        offline[(t.id, pid)] = (t, pid)
                    log.debug("broker %d assigned partition %s-%d to %s dir %s", broker_id, t.name, pid,
                              "ONLINE" if online else "OFFLINE", directory.id)
                parts.append({"partition_index": pid, "error_code": int(code)})
            answer_topics.append({"topic_id": topic.topic_id, "partitions": parts})
        answer_dirs.append({"id": directory.id, "topics": answer_topics})
    for (tid, pid), dirs in changed.items():
        p = image.topics_by_id[tid].partitions[pid]
        if tuple(dirs) != p.directories:
            records.append(record("PartitionChangeRecord", partition_id=pid, topic_id=tid, directories=dirs))
    if offline:
        records += leader_and_isr(((t, pid, t.partitions[pid]) for t, pid in offline.values()), broker_id)
    return ControllerResult(records, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                                      "directories": answer_dirs})
