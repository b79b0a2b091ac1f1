"""Broker registrations, heartbeats, fencing and controlled shutdown on the active controller, as records.

Kafka's ``ClusterControlManager`` + ``BrokerHeartbeatManager`` (and the broker-driven parts of
``ReplicationControlManager``), pure: no IO, no clock of its own (``now_ms`` is passed in), decided against the
committed :class:`klog.metadata.MetadataImage`. Each operation returns a :class:`ControllerResult`: the records to
commit and the wire response (the generated BrokerRegistrationResponse / BrokerHeartbeatResponse) to send once they
are committed; a refusal's reason is the result's :attr:`LifecycleResult.error_message` (and a log line): Kafka's
schemas for these two responses carry no message.

What lives here and not in the image, in memory only and updated at decision time (so a decision never waits
for the commit of the previous one), as Kafka's ``BrokerHeartbeatManager`` and ``BrokerHeartbeatTracker``: one
:class:`BrokerSession` per registered broker (fenced or not, the metadata offset it reported, its
controlled-shutdown offset) and the time of the last heartbeat of each (broker id, broker epoch). A newly active
controller rebuilds both from the image with :meth:`ClusterControlManager.activate`: every registered broker's
epoch counts as heard from then.

Semantics (Kafka 4.x):

- BrokerRegistration writes a RegisterBrokerRecord whose broker epoch is the record's own log offset
  (``record_offset``: where the controller will append it), fenced and not in controlled shutdown. Another
  registration of the same node.id replaces it with a new epoch, unless the registered epoch heartbeated within
  the session timeout and the new registration comes from another incarnation id: DUPLICATE_BROKER_REGISTRATION
  until that session expires. (As in Kafka 4.x this holds after a controlled shutdown too: a restarted broker
  waits for the last heartbeat of its previous process to age out; a registration alone is no heartbeat.)
  A wrong cluster id is INCONSISTENT_CLUSTER_ID; a finalized feature level the broker does not support is
  UNSUPPORTED_VERSION.
- BrokerHeartbeat with an unknown broker or another epoch is STALE_BROKER_EPOCH. Otherwise it renews the session
  and moves the broker through Kafka's states: FENCED -> UNFENCED once it does not ask to stay fenced and its
  metadata offset reached its registration record; UNFENCED -> FENCED when it asks; UNFENCED -> CONTROLLED_SHUTDOWN
  when it asks to shut down while leading partitions (else SHUTDOWN_NOW); CONTROLLED_SHUTDOWN -> SHUTDOWN_NOW
  once it leads nothing and every active broker has replayed the records that moved its leaders.
- A session (broker id, epoch) not renewed within ``broker.session.timeout.ms`` expires; if it is the broker's
  current registration and the broker is not fenced yet, it is fenced (one broker per call, as Kafka does).
- Fencing (expiry, WantFence, SHUTDOWN_NOW) and controlled shutdown take the broker out of every ISR it is in and
  move its leaderships to another ISR member on an active broker; where none exists the partition keeps its ISR
  and gets leader -1 (offline), unless ``unclean.leader.election.enable`` lets any active replica lead.
  Unfencing elects the broker leader of the offline partitions whose ISR holds it.
- Fence/unfence are BrokerRegistrationChangeRecords from metadata.version 3.3-IV2 (every Kafka 4 cluster),
  FenceBrokerRecord / UnfenceBrokerRecord before; InControlledShutdown needs 3.3-IV3.

- Eligible leader replicas (KIP-966, when ``eligible.leader.replicas.version`` is finalized at 1, as in a new
  cluster): see :mod:`klog.controller.partition_change`. A registration from a new incarnation that does not
  name its previous broker epoch (an unclean shutdown) takes the broker out of every ISR and ELR.

- Log directories (JBOD, KIP-858; :mod:`klog.controller.directories`): a heartbeat's OfflineLogDirs take the
  broker's replicas in those dirs out of their ISR and leadership; AssignReplicasToDirs records which dir holds
  each replica; a replica in an offline dir never leads. From metadata.version 4.3-IV0 a heartbeat's
  CordonedLogDirs (KIP-1066) that differ from the registration's are recorded (BrokerRegistrationChangeRecord);
  placement then skips a broker whose dirs are all cordoned (:mod:`klog.controller.topics`).

- UnregisterBroker (``kafka-cluster unregister``): the broker leaves every ISR (its leaderships move as on
  fencing), then an UnregisterBrokerRecord with its registered epoch; its session is dropped. As Kafka 4.3's
  ``ReplicationControlManager.unregisterBroker`` it needs only a registration (an unknown id is
  BROKER_ID_NOT_REGISTERED): a live broker is unregistered too, and re-registers once its heartbeat is answered
  STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from klog.metadata.features import MV_CORDONED_LOG_DIRS, register_broker_record_version
from klog.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode

from .directories import assign_replicas_to_dirs, dir_online, directories_offline
from .partition_change import (
    MIN_INSYNC_REPLICAS,
    Election,
    effective_min_isr,
    elr_enabled,
    partition_change,
    unclean_election_allowed,
)
from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AssignReplicasToDirsRequest,
        AssignReplicasToDirsResponse,
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
        UnregisterBrokerResponse,
    )

__all__ = [
    "BROKER_SESSION_TIMEOUT_MS",
    "MAX_REGISTERED_BROKERS",
    "BrokerControlState",
    "BrokerSession",
    "ClusterControlManager",
    "LifecycleResult",
    "leader_and_isr_changes",
    "not_registered",
    "unfenced_broker_elections",
    "unregister_records",
    "unregistered",
]

log = logging.getLogger("klog.controller.brokers")

#: ``broker.session.timeout.ms`` default.
BROKER_SESSION_TIMEOUT_MS = 9000
#: Registered broker ids a cluster may hold (issue 15's bound on brokers per cluster); a registration of a new
#: id beyond it is refused with INVALID_REGISTRATION naming this limit.
MAX_REGISTERED_BROKERS = 1000
#: metadata.version levels (Kafka's ``MetadataVersion``): BrokerRegistrationChangeRecord from 3.3-IV2,
#: its InControlledShutdown field from 3.3-IV3.
MV_BROKER_REGISTRATION_CHANGE_RECORD = 6
MV_IN_CONTROLLED_SHUTDOWN = 7
#: BrokerRegistrationChangeRecord.Fenced values (Kafka's ``BrokerRegistrationFencingChange``).
FENCE, UNFENCE = 1, -1


class BrokerControlState(enum.Enum):
    """Kafka's ``BrokerControlState``: (fenced, in controlled shutdown, should shut down)."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self.value[1]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


@dataclass
class BrokerSession:
    """Kafka's ``BrokerHeartbeatState``: what the controller knows of a broker between records."""

    broker_id: int
    #: the epoch of the registration this session belongs to: the newest one decided, which may not be committed
    #: yet (heartbeats under an older epoch are stale from the moment a new registration is decided)
    epoch: int
    fenced: bool = True
    #: the highest metadata offset the broker reported (-1: none yet)
    metadata_offset: int = -1
    #: the offset of the last record of the batch that began its controlled shutdown (-1: not shutting down;
    #: fencing ends a controlled shutdown)
    controlled_shutdown_offset: int = -1

    @property
    def state(self) -> BrokerControlState:
        if self.controlled_shutdown_offset >= 0:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if self.fenced else BrokerControlState.UNFENCED

    @property
    def active(self) -> bool:
        """Unfenced and not shutting down: may lead partitions (Kafka's ``isActive``)."""
        return not self.fenced and self.controlled_shutdown_offset < 0


R = TypeVar("R")


@dataclass(frozen=True)
class LifecycleResult(ControllerResult[R]):
    """A registration's or heartbeat's result: ``error_message`` says why it was refused (None: it was not), for the
    controller's log and tests; Kafka's BrokerRegistration and BrokerHeartbeat responses have no field for it."""

    error_message: str | None = None


def _registration_error(broker_id: int, code: int, message: str) -> LifecycleResult[BrokerRegistrationResponse]:
    log.warning("registration of broker %d refused (%s): %s", broker_id, ErrorCode(code).name, message)
    return LifecycleResult((), {"throttle_time_ms": 0, "error_code": int(code), "broker_epoch": -1}, message)


def _heartbeat_error(code: int, message: str) -> LifecycleResult[BrokerHeartbeatResponse]:
    return LifecycleResult((), {"throttle_time_ms": 0, "error_code": int(code), "is_caught_up": False,
                                "is_fenced": True, "should_shut_down": False}, message)


class ClusterControlManager:
    """The active controller's view of broker liveness. ``cluster_id`` is the quorum's; ``session_timeout_ms``
    is ``broker.session.timeout.ms``; ``unclean_leader_election`` is the broker default of
    ``unclean.leader.election.enable`` (a topic's own config overrides it)."""

    def __init__(self, cluster_id: str, *, session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS,
                 unclean_leader_election: bool = False, max_registered_brokers: int = MAX_REGISTERED_BROKERS,
                 min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> None:
        assert session_timeout_ms > 0, session_timeout_ms
        assert max_registered_brokers > 0, max_registered_brokers
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.unclean_leader_election = unclean_leader_election
        #: the static ``min.insync.replicas`` (a topic's or the cluster's dynamic one overrides it)
        self.min_insync_replicas = min_insync_replicas
        self.max_registered_brokers = max_registered_brokers
        self.sessions: dict[int, BrokerSession] = {}
        #: (broker id, broker epoch) -> time of its last heartbeat (Kafka's ``BrokerHeartbeatTracker``)
        self.last_contact_ms: dict[tuple[int, int], int] = {}

    # ---- sessions ---------------------------------------------------------------------------------------

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """This controller became active: a session for every registered broker, heard from now (Kafka's
        ``ClusterControlManager.activate``), so none is fenced for the time the quorum had no controller."""
        self.sessions = {bid: BrokerSession(bid, b.epoch, fenced=b.fenced) for bid, b in image.brokers.items()}
        self.last_contact_ms = {(bid, b.epoch): now_ms for bid, b in image.brokers.items()}

    def has_valid_session(self, broker_id: int, epoch: int, now_ms: int) -> bool:
        last = self.last_contact_ms.get((broker_id, epoch))
        return last is not None and not self._expired(last, now_ms)

    def _expired(self, last_contact_ms: int, now_ms: int) -> bool:
        return last_contact_ms + self.session_timeout_ms < now_ms

    def next_expiry_ms(self) -> int | None:
        """When the earliest session expires (the driver calls :meth:`fence_stale_broker` then)."""
        if not self.last_contact_ms:
            return None
        return min(self.last_contact_ms.values()) + self.session_timeout_ms + 1

    def _is_active(self, broker_id: int, image: MetadataImage) -> bool:
        """May lead: the session says unfenced and not shutting down (it runs ahead of the image), and the
        registration is not marked in controlled shutdown (a mark only a new registration clears)."""
        s = self.sessions.get(broker_id)
        registration = image.brokers.get(broker_id)
        return s is not None and s.active and registration is not None and not registration.in_controlled_shutdown

    def _lowest_active_offset(self) -> int:
        offsets = [s.metadata_offset for s in self.sessions.values() if s.active]
        return min(offsets) if offsets else 2**63 - 1

    # ---- BrokerRegistration (62) ------------------------------------------------------------------------

    def register_broker(self, request: BrokerRegistrationRequest, image: MetadataImage, now_ms: int, *, record_offset: int
                        ) -> LifecycleResult[BrokerRegistrationResponse]:
        """``request``: a BrokerRegistrationRequest (Struct or any object with its fields). ``record_offset``:
        the log offset the result's first record will be appended at, which becomes the broker epoch."""
        assert record_offset >= 0, record_offset
        broker_id = request.broker_id
        if request.cluster_id != self.cluster_id:
            return _registration_error(broker_id, ErrorCode.INCONSISTENT_CLUSTER_ID,
                                       f"Expected cluster ID {self.cluster_id}, but got cluster ID "
                                       f"{request.cluster_id}")
        if broker_id < 0:
            return _registration_error(broker_id, ErrorCode.INVALID_REGISTRATION,
                                       f"broker id {broker_id} is negative")
        existing = image.brokers.get(broker_id)
        if existing is None and len(image.brokers) >= self.max_registered_brokers:
            return _registration_error(broker_id, ErrorCode.INVALID_REGISTRATION,
                                       f"the cluster already has {len(image.brokers)} registered brokers "
                                       f"(MAX_REGISTERED_BROKERS={self.max_registered_brokers})")
        if existing is not None and self.has_valid_session(broker_id, existing.epoch, now_ms) \
                and existing.incarnation_id != request.incarnation_id:
            return _registration_error(broker_id, ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                                       "Another broker is registered with that broker id. If the broker was "
                                       "recently restarted this should self-resolve once the heartbeat timeout "
                                       "expires.")
        names = [lst.name for lst in request.listeners]
        if not names:
            return _registration_error(broker_id, ErrorCode.INVALID_REGISTRATION,
                                       f"broker {broker_id} names no listeners")
        if len(set(names)) != len(names):
            return _registration_error(broker_id, ErrorCode.INVALID_REGISTRATION,
                                       f"broker {broker_id} names a listener twice: {', '.join(names)}")
        supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in request.features}
        for feature, level in sorted(image.features.items()):
            lo, hi = supported.get(feature, (0, 0))
            if not lo <= level <= hi:
                return _registration_error(broker_id, ErrorCode.UNSUPPORTED_VERSION,
                                           f"Unable to register because the broker does not support finalized "
                                           f"version {level} of {feature}. The broker wants a version between "
                                           f"{lo} and {hi}, inclusive.")
        epoch = record_offset
        registration = record(
            "RegisterBrokerRecord", register_broker_record_version(image.metadata_version or 0),
            broker_id=broker_id, incarnation_id=request.incarnation_id, broker_epoch=epoch,
            end_points=[{"name": lst.name, "host": lst.host, "port": lst.port,
                         "security_protocol": lst.security_protocol} for lst in request.listeners],
            features=[{"name": f.name, "min_supported_version": f.min_supported_version,
                       "max_supported_version": f.max_supported_version} for f in request.features],
            rack=request.rack, fenced=True, in_controlled_shutdown=False,
            log_dirs=list(getattr(request, "log_dirs", None) or []))
        records = [registration]
        if existing is not None and existing.incarnation_id != request.incarnation_id and elr_enabled(image) \
                and getattr(request, "previous_broker_epoch", -1) != existing.epoch:
            # Kafka's handleBrokerUncleanShutdown: a new process that did not shut down cleanly (it does not
            # name its previous epoch) may have lost unflushed records, so it leaves every ISR and ELR.
            records[:0] = leader_and_isr_changes(image, self._is_active_in(image), self._unclean_for(image),
                                                 _with_in_isr_or_elr(image, broker_id), unclean_shutdown=broker_id,
                                                 min_insync_replicas=self.min_insync_replicas)
        self.sessions[broker_id] = BrokerSession(broker_id, epoch, fenced=True)
        log.info("registering broker %d (incarnation %s) with epoch %d%s", broker_id, request.incarnation_id, epoch,
                 "" if existing is None else f", replacing epoch {existing.epoch}")
        return LifecycleResult(records, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "broker_epoch": epoch})

    # ---- BrokerHeartbeat (63) ---------------------------------------------------------------------------

    def process_heartbeat(self, request: BrokerHeartbeatRequest, image: MetadataImage, now_ms: int, *, record_offset: int
                          ) -> LifecycleResult[BrokerHeartbeatResponse]:
        """``request``: a BrokerHeartbeatRequest. ``record_offset``: where the result's first record would be
        appended (the log end offset)."""
        broker_id, epoch = request.broker_id, request.broker_epoch
        registration = image.brokers.get(broker_id)
        session = self.sessions.get(broker_id)
        if registration is None or session is None:
            return _heartbeat_error(ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker "
                                                                  f"{broker_id}")
        if registration.epoch != epoch or session.epoch != epoch:
            return _heartbeat_error(ErrorCode.STALE_BROKER_EPOCH, f"Expected broker epoch {session.epoch}, but got "
                                                                  f"broker epoch {epoch}")
        self.last_contact_ms[(broker_id, epoch)] = now_ms
        current = session.state
        nxt = self._next_state(session, request, registration.epoch, image)
        records: list[MetadataRecord] = []
        offline_dirs = getattr(request, "offline_log_dirs", None) or []
        if offline_dirs:
            records += directories_offline(image, broker_id, epoch, offline_dirs, self._leader_and_isr_without(image))
        if nxt is not current:
            if nxt is BrokerControlState.FENCED or nxt is BrokerControlState.SHUTDOWN_NOW:
                records = self._fence_records(broker_id, image, session)
            elif nxt is BrokerControlState.UNFENCED:
                records = self._unfence_records(broker_id, epoch, image)
            else:
                records = self._controlled_shutdown_records(broker_id, epoch, image)
            log.info("broker %d: %s -> %s", broker_id, current.name, nxt.name)
        cordoned = getattr(request, "cordoned_log_dirs", None)
        if cordoned is not None and (image.metadata_version or 0) >= MV_CORDONED_LOG_DIRS \
                and (registration.cordoned_directories is None
                     or set(registration.cordoned_directories) != set(cordoned)):
            # Kafka's handleDirectoriesCordoned: the broker's cordoned dirs changed (or are first reported)
            records.append(record("BrokerRegistrationChangeRecord", 3, broker_id=broker_id, broker_epoch=epoch,
                                  cordoned_log_dirs=list(cordoned)))
        session.metadata_offset = max(session.metadata_offset, request.current_metadata_offset)
        session.fenced = nxt.fenced
        if nxt is BrokerControlState.CONTROLLED_SHUTDOWN and session.controlled_shutdown_offset < 0:
            # Kafka: the end offset of the batch written for the heartbeat that began the controlled shutdown
            session.controlled_shutdown_offset = record_offset + len(records) - 1
        elif nxt is not BrokerControlState.CONTROLLED_SHUTDOWN:
            session.controlled_shutdown_offset = -1
        return LifecycleResult(records, {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "is_caught_up": request.current_metadata_offset >= registration.epoch,
            "is_fenced": nxt.fenced, "should_shut_down": nxt.should_shut_down})

    def _next_state(self, session: BrokerSession, request: BrokerHeartbeatRequest, registration_offset: int,
                    image: MetadataImage) -> BrokerControlState:
        """Kafka's ``BrokerHeartbeatManager.calculateNextBrokerState``."""
        current = session.state
        if current is BrokerControlState.FENCED:
            if request.want_shut_down:
                return BrokerControlState.SHUTDOWN_NOW
            if not request.want_fence and request.current_metadata_offset >= registration_offset:
                return BrokerControlState.UNFENCED
            return BrokerControlState.FENCED
        if current is BrokerControlState.UNFENCED:
            if request.want_fence:
                return BrokerControlState.SHUTDOWN_NOW if request.want_shut_down else BrokerControlState.FENCED
            if request.want_shut_down:
                return BrokerControlState.CONTROLLED_SHUTDOWN if _leads_any(image, session.broker_id) \
                    else BrokerControlState.SHUTDOWN_NOW
            return BrokerControlState.UNFENCED
        if current is BrokerControlState.CONTROLLED_SHUTDOWN:
            if _leads_any(image, session.broker_id):
                return BrokerControlState.CONTROLLED_SHUTDOWN
            # every active broker has replayed the records that moved this broker's leaders away
            if session.controlled_shutdown_offset <= self._lowest_active_offset():
                return BrokerControlState.SHUTDOWN_NOW
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.SHUTDOWN_NOW

    def note_contact(self, broker_id: int, epoch: int, now_ms: int) -> None:
        """A heartbeat of ``broker_id``'s session ``epoch`` arrived (Kafka's BrokerHeartbeatTracker, updated on the
        request thread): its session is alive from now, before the heartbeat's own decision, which may wait behind
        others while the session expiry runs first."""
        key = (broker_id, epoch)
        if key in self.last_contact_ms:
            self.last_contact_ms[key] = max(self.last_contact_ms[key], now_ms)

    # ---- session expiry -----------------------------------------------------------------------------------

    def fence_stale_broker(self, image: MetadataImage, now_ms: int) -> ControllerResult[int | None]:
        """Expire the session that expired first, if any, and fence its broker if that session is its current
        registration and it is not fenced yet (Kafka handles one session per run so as not to flood the log; the
        driver calls again while this returns a broker id)."""
        stale = [(last, key) for key, last in self.last_contact_ms.items() if self._expired(last, now_ms)]
        if not stale:
            return ControllerResult((), None)
        _, (broker_id, epoch) = min(stale)
        del self.last_contact_ms[(broker_id, epoch)]
        registration = image.brokers.get(broker_id)
        session = self.sessions.get(broker_id)
        if registration is None or registration.epoch != epoch or session is None or session.epoch != epoch \
                or session.fenced:
            return ControllerResult((), broker_id)   # an old epoch, or nothing left to fence
        log.info("fencing broker %d because its session has timed out (broker.session.timeout.ms=%d)",
                 broker_id, self.session_timeout_ms)
        records = self._fence_records(broker_id, image, session)
        session.fenced = True
        session.controlled_shutdown_offset = -1
        return ControllerResult(records, broker_id)

    # ---- UnregisterBroker (64) --------------------------------------------------------------------------

    def unregister_broker(self, broker_id: int, image: MetadataImage) -> ControllerResult[UnregisterBrokerResponse]:
        """Kafka's ``unregisterBroker`` / ``handleBrokerUnregistered``: out of every ISR (then ELR) it is in, then
        the UnregisterBrokerRecord; the session goes (heartbeats of that epoch are stale from now)."""
        registration = image.brokers.get(broker_id)
        if registration is None:
            log.info("UnregisterBroker: broker %d is not registered", broker_id)
            return ControllerResult((), not_registered(broker_id))
        records = unregister_records(image, broker_id, self._is_active_in(image), self._unclean_for(image),
                                     self.min_insync_replicas)
        self.sessions.pop(broker_id, None)
        for key in [key for key in self.last_contact_ms if key[0] == broker_id]:
            del self.last_contact_ms[key]
        log.info("unregistering broker %d (epoch %d)", broker_id, registration.epoch)
        return ControllerResult(records, unregistered())

    # ---- records ------------------------------------------------------------------------------------------

    def _fence_records(self, broker_id: int, image: MetadataImage, session: BrokerSession) -> list[MetadataRecord]:
        """Kafka's ``handleBrokerFenced``: out of every ISR, leaders moved, then the fence record (left out when
        the broker is fenced already, e.g. a fenced broker asking to shut down)."""
        epoch = image.brokers[broker_id].epoch
        records = leader_and_isr_changes(image, self._is_active_in(image), self._unclean_for(image),
                                         _with_in_isr(image, broker_id), remove=broker_id,
                                         min_insync_replicas=self.min_insync_replicas)
        if session.fenced and image.brokers[broker_id].fenced:
            return records
        if (image.metadata_version or 0) >= MV_BROKER_REGISTRATION_CHANGE_RECORD:
            records.append(record("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=epoch,
                                  fenced=FENCE))
        else:
            records.append(record("FenceBrokerRecord", id=broker_id, epoch=epoch))
        return records

    def _unfence_records(self, broker_id: int, epoch: int, image: MetadataImage) -> list[MetadataRecord]:
        """Kafka's ``handleBrokerUnfenced``: the unfence record, then the broker leads the offline partitions
        whose ISR holds it."""
        if (image.metadata_version or 0) >= MV_BROKER_REGISTRATION_CHANGE_RECORD:
            records = [record("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=epoch,
                              fenced=UNFENCE)]
        else:
            records = [record("UnfenceBrokerRecord", id=broker_id, epoch=epoch)]
        return records + unfenced_broker_elections(image, broker_id, self._is_active_in(image),
                                                   self._unclean_for(image), self.min_insync_replicas)

    def _controlled_shutdown_records(self, broker_id: int, epoch: int, image: MetadataImage
                                     ) -> list[MetadataRecord]:
        """Kafka's ``handleBrokerInControlledShutdown``: marked in controlled shutdown, out of every ISR, its
        leaders moved where another ISR member can take over."""
        records: list[MetadataRecord] = []
        if (image.metadata_version or 0) >= MV_IN_CONTROLLED_SHUTDOWN \
                and not image.brokers[broker_id].in_controlled_shutdown:
            records.append(record("BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=epoch,
                                  in_controlled_shutdown=1))
        records += leader_and_isr_changes(image, self._is_active_in(image), self._unclean_for(image),
                                          _with_in_isr(image, broker_id), remove=broker_id,
                                          min_insync_replicas=self.min_insync_replicas)
        return records

    def _leader_and_isr_without(self, image: MetadataImage
                                ) -> Callable[[Iterator[tuple[TopicImage, int, PartitionRegistration]], int],
                                              list[MetadataRecord]]:
        """The records taking a broker out of the ISR and leadership of the given partitions (a failed log dir)."""
        def changes(partitions: Iterator[tuple[TopicImage, int, PartitionRegistration]], broker_id: int
                    ) -> list[MetadataRecord]:
            return leader_and_isr_changes(image, self._is_active_in(image), self._unclean_for(image), partitions,
                                          remove=broker_id, min_insync_replicas=self.min_insync_replicas)
        return changes

    # ---- AssignReplicasToDirs (73) ------------------------------------------------------------------------

    def assign_replicas_to_dirs(self, request: AssignReplicasToDirsRequest, image: MetadataImage
                                ) -> ControllerResult[AssignReplicasToDirsResponse]:
        """A broker says which of its log dirs holds each of its replicas listed."""
        registration = image.brokers.get(request.broker_id)
        session = self.sessions.get(request.broker_id)
        epoch_ok = registration is not None and registration.epoch == request.broker_epoch \
            and (session is None or session.epoch == request.broker_epoch)
        return assign_replicas_to_dirs(request, image, broker_epoch_ok=epoch_ok,
                                       leader_and_isr=self._leader_and_isr_without(image))

    def _is_active_in(self, image: MetadataImage) -> Callable[[int], bool]:
        return lambda broker_id: self._is_active(broker_id, image)

    def _unclean_for(self, image: MetadataImage) -> Callable[[str], bool]:
        return lambda topic: unclean_election_allowed(image, topic, self.unclean_leader_election)


def unregistered() -> UnregisterBrokerResponse:
    """UnregisterBroker's success, as Kafka 4.3.1 answers it (a new response's ErrorMessage: "", not null)."""
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": ""}


def not_registered(broker_id: int) -> UnregisterBrokerResponse:
    """UnregisterBroker's answer for an id with no registration (Kafka's BrokerIdNotRegisteredException)."""
    return {"throttle_time_ms": 0, "error_code": ErrorCode.BROKER_ID_NOT_REGISTERED,
            "error_message": f"Broker ID {broker_id} is not currently registered"}


def unregister_records(image: MetadataImage, broker_id: int, is_active: Callable[[int], bool],
                       unclean: Callable[[str], bool], min_insync_replicas: int = MIN_INSYNC_REPLICAS
                       ) -> list[MetadataRecord]:
    """The records unregistering registered ``broker_id`` (Kafka's ``handleBrokerUnregistered``): its ISR
    memberships, then its ELR ones, removed as on fencing, then the UnregisterBrokerRecord."""
    def without(partitions: Iterator[tuple[TopicImage, int, PartitionRegistration]]) -> list[MetadataRecord]:
        return leader_and_isr_changes(image, is_active, unclean, partitions, remove=broker_id,
                                      min_insync_replicas=min_insync_replicas)

    records = without(_with_in_isr(image, broker_id))
    records += without((t, pid, p) for t, pid, p in _with_in_isr_or_elr(image, broker_id) if broker_id not in p.isr)
    records.append(record("UnregisterBrokerRecord", broker_id=broker_id,
                          broker_epoch=image.brokers[broker_id].epoch))
    return records


def _leads_any(image: MetadataImage, broker_id: int) -> bool:
    return any(p.leader == broker_id for t in image.topics_by_id.values() for p in t.partitions.values())


def _with_in_isr(image: MetadataImage, broker_id: int) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for t in image.topics_by_id.values():
        for pid, p in t.partitions.items():
            if broker_id in p.isr:
                yield t, pid, p


def _with_in_isr_or_elr(image: MetadataImage, broker_id: int
                        ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for t in image.topics_by_id.values():
        for pid, p in t.partitions.items():
            if broker_id in p.isr or broker_id in p.elr:
                yield t, pid, p


def unfenced_broker_elections(image: MetadataImage, broker_id: int, is_active: Callable[[int], bool],
                              unclean: Callable[[str], bool], min_insync_replicas: int = MIN_INSYNC_REPLICAS
                              ) -> list[MetadataRecord]:
    """Kafka's ``handleBrokerUnfenced`` elections: ``broker_id`` leads the partitions without a leader that it
    may lead (in their ISR or ELR, or their last known leader), even while the image still shows it fenced."""
    return leader_and_isr_changes(image, is_active, unclean, _without_leader(image), add=broker_id,
                                  min_insync_replicas=min_insync_replicas)


def _without_leader(image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for t in image.topics_by_id.values():
        for pid, p in t.partitions.items():
            if p.leader == NO_LEADER:
                yield t, pid, p


def leader_and_isr_changes(image: MetadataImage, is_active: Callable[[int], bool], unclean: Callable[[str], bool],
                           partitions: Iterator[tuple[TopicImage, int, PartitionRegistration]], *,
                           remove: int = NO_LEADER, add: int = NO_LEADER, unclean_shutdown: int = NO_LEADER,
                           min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> list[MetadataRecord]:
    """PartitionChangeRecords taking ``remove`` (and ``unclean_shutdown``) out of the ISR and leadership of
    ``partitions`` and letting ``add`` lead even while the image still shows it fenced (Kafka's
    ``generateLeaderAndIsrUpdates``): :func:`klog.controller.partition_change.partition_change` decides each, with
    eligible leader replicas when the image enables them and an unclean election where the topic allows one.
    ``unclean_shutdown`` also leaves every ELR. ``min_insync_replicas``: the controller's static default."""
    def acceptable_for(p: PartitionRegistration) -> Callable[[int], bool]:
        # Kafka's LeaderAcceptor: an active broker (or the one being unfenced) whose replica's log dir is online
        return lambda r: r != remove and r != unclean_shutdown and (r == add or is_active(r)) \
            and dir_online(image, p, r)

    elr = elr_enabled(image)
    records: list[MetadataRecord] = []
    for topic, pid, p in partitions:
        change = partition_change(
            topic, pid, p, target_isr=[r for r in p.isr if r not in (remove, unclean_shutdown)],
            acceptable=acceptable_for(p), elr=elr, min_isr=effective_min_isr(image, topic, min_insync_replicas),
            election=Election.UNCLEAN if unclean(topic.name) else Election.ONLINE,
            unclean_shutdown=() if unclean_shutdown == NO_LEADER else (unclean_shutdown,))
        if change is not None:
            records.append(change)
    return records
