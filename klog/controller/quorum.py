"""Controller-quorum configuration and the pure parts of driving Raft (no sockets, no asyncio).

Kafka's timing properties map onto raft-rs ticks (one tick every ``tick_ms``):

- ``controller.quorum.fetch.timeout.ms`` (2000): how long a follower waits without hearing from
  the leader before it stands for election -> raft's randomized election timeout starts there:
  ``min_election_tick = fetch_timeout / tick``;
- ``controller.quorum.election.backoff.max.ms`` (1000): the random spread added before
  (re)standing, so two candidates rarely collide -> ``max_election_tick = min + backoff / tick``;
- ``controller.quorum.election.timeout.ms`` (1000): raft's ``election_tick`` (``/ tick``), the
  leader's check-quorum lease: a leader that has not heard from a majority for that long steps
  down (Kafka's leader does the same after its fetch timeout);
- the tick is ``election.timeout.ms / 10`` (100 ms by default) and heartbeats go every
  ``HEARTBEAT_TICKS`` ticks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

#: Ticks per election timeout: the tick is election.timeout.ms / this.
TICKS_PER_ELECTION_TIMEOUT = 10
#: Leader heartbeat period, in ticks (raft-rs needs it below election_tick).
HEARTBEAT_TICKS = 2
#: Preamble a raft peer connection starts with, then the sender's node id (int32 BE). A Kafka
#: request would start with a 4-byte size; "KLRA" read as one (1.2 GB) is never valid, so a
#: shared controller listener can tell the two apart from the first four bytes.
RAFT_PREAMBLE = b"KLRAFT\x00\x01"


class QuorumConfigError(ValueError):
    """A controller-quorum property is missing or malformed; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_voters(value: str, key: str = "controller.quorum.voters") -> dict[int, Voter]:
    """Parse ``1@host:port,2@host:port`` (Kafka's static voter list)."""
    voters: dict[int, Voter] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        ident, at, endpoint = item.partition("@")
        host, colon, port = endpoint.rpartition(":")
        if not at or not colon or not host:
            raise QuorumConfigError(f"{key}: {item!r} is not <node id>@<host>:<port>")
        try:
            node_id, port_n = int(ident), int(port)
        except ValueError:
            raise QuorumConfigError(f"{key}: {item!r} has a non-numeric node id or port") from None
        if node_id < 1 or not 0 < port_n < 65536:
            raise QuorumConfigError(f"{key}: {item!r}: node ids must be >= 1 and ports in 1-65535")
        if node_id in voters:
            raise QuorumConfigError(f"{key}: node id {node_id} is listed twice")
        voters[node_id] = Voter(node_id, host.strip("[]"), port_n)
    if not voters:
        raise QuorumConfigError(f"{key} is empty")
    return voters


@dataclasses.dataclass(frozen=True)
class QuorumConfig:
    """One quorum member's settings: Kafka's property names where Kafka has them."""

    node_id: int
    voters: Mapping[int, Voter]
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    # klog's own bounds (no Kafka equivalent).
    max_size_per_msg: int = 1 << 20  # bytes of entries in one append message
    max_inflight_msgs: int = 256  # append messages in flight per follower
    max_uncommitted_size: int = 64 << 20  # bytes a leader holds proposed but uncommitted
    max_entry_bytes: int = 8 << 20  # bytes of one proposed batch
    max_frame_bytes: int = 128 << 20  # one raft message on the wire (snapshots included)
    max_send_queue_messages: int = 1024  # per peer; beyond it messages are dropped (raft resends)
    max_inbox_messages: int = 4096  # received, not yet stepped
    max_pending_proposals: int = 10_000  # proposed, not yet committed
    reconnect_backoff_ms: int = 50  # first retry after a failed connection, doubling ...
    reconnect_backoff_max_ms: int = 1000  # ... up to this
    #: where raft peers connect (the controller listener); None: this node's voter endpoint
    bind_host: str | None = None
    bind_port: int | None = None
    segment_bytes: int = 1 << 30  # metadata.log.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # metadata.log.segment.ms

    @classmethod
    def from_broker_config(cls, config: Any) -> QuorumConfig:
        """The quorum settings of a ``klog-broker`` whose properties name a static quorum
        (``controller.quorum.voters``) and give it a controller role. Misconfiguration names the key."""
        if "controller" not in config.roles:
            raise QuorumConfigError("process.roles=broker alone (a broker of a separate controller quorum) is not "
                                    "supported yet: add controller to process.roles")
        if not config.controller_listeners:
            raise QuorumConfigError("controller.listener.names: a controller needs a listener named there and "
                                    "present in listeners")
        listener = config.controller_listeners[0]
        if listener.security_protocol != "PLAINTEXT":
            raise QuorumConfigError(f"listener.security.protocol.map: controller listener {listener.name} uses "
                                    f"{listener.security_protocol}; klog serves PLAINTEXT only")
        voters = parse_voters(",".join(config["controller.quorum.voters"]))
        me = voters.get(config.node_id)
        if me is None:
            raise QuorumConfigError(f"node.id {config.node_id} is not among controller.quorum.voters {sorted(voters)}")
        if listener.port not in (0, me.port):
            raise QuorumConfigError(f"listeners: controller listener {listener.name} is on port {listener.port} but "
                                    f"controller.quorum.voters gives node {me.node_id} port {me.port}")
        cfg = cls(node_id=config.node_id, voters=voters,
                  election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                  fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                  election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
                  bind_host=listener.host or "0.0.0.0", bind_port=me.port,
                  reconnect_backoff_ms=config["controller.quorum.retry.backoff.ms"],
                  segment_bytes=config["metadata.log.segment.bytes"], segment_ms=config["metadata.log.segment.ms"])
        return cfg

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> QuorumConfig:
        def num(key: str, default: int) -> int:
            raw = props.get(key)
            if raw is None:
                return default
            try:
                v = int(str(raw).strip())
            except ValueError:
                raise QuorumConfigError(f"{key}: {raw!r} is not an integer") from None
            if v <= 0:
                raise QuorumConfigError(f"{key}: must be positive, got {v}")
            return v

        if "node.id" not in props:
            raise QuorumConfigError("node.id is required")
        if "controller.quorum.voters" not in props:
            raise QuorumConfigError("controller.quorum.voters is required")
        node_id = num("node.id", 0)
        voters = parse_voters(props["controller.quorum.voters"])
        if node_id not in voters:
            raise QuorumConfigError(f"node.id {node_id} is not among controller.quorum.voters {sorted(voters)}")
        return cls(
            node_id=node_id,
            voters=voters,
            election_timeout_ms=num("controller.quorum.election.timeout.ms", 1000),
            fetch_timeout_ms=num("controller.quorum.fetch.timeout.ms", 2000),
            election_backoff_max_ms=num("controller.quorum.election.backoff.max.ms", 1000),
        )

    def __post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise QuorumConfigError(f"node.id {self.node_id} is not among the voters {sorted(self.voters)}")
        if self.fetch_timeout_ms < self.election_timeout_ms:
            raise QuorumConfigError(
                "controller.quorum.fetch.timeout.ms must be >= controller.quorum.election.timeout.ms "
                f"({self.fetch_timeout_ms} < {self.election_timeout_ms})"
            )

    @property
    def tick_ms(self) -> int:
        return max(1, self.election_timeout_ms // TICKS_PER_ELECTION_TIMEOUT)

    def raft_ticks(self) -> dict[str, int]:
        """Keyword arguments of ``RaftNode`` derived from the timing properties."""
        t = self.tick_ms
        election = max(HEARTBEAT_TICKS + 1, self.election_timeout_ms // t)
        low = max(election, self.fetch_timeout_ms // t)
        high = low + max(1, self.election_backoff_max_ms // t)
        return {"election_tick": election, "min_election_tick": low, "max_election_tick": high,
                "heartbeat_tick": HEARTBEAT_TICKS}

    def node_limits(self) -> dict[str, int]:
        return {"max_size_per_msg": self.max_size_per_msg, "max_inflight_msgs": self.max_inflight_msgs,
                "max_uncommitted_size": self.max_uncommitted_size, "max_entry_bytes": self.max_entry_bytes,
                "segment_bytes": self.segment_bytes, "segment_ms": self.segment_ms}


class TickClock:
    """How many raft ticks are due at a time (monotonic ms). After a stall, at most
    ``max_burst`` ticks run at once: a paused process must not fire several elections in a row."""

    def __init__(self, tick_ms: int, now_ms: float, max_burst: int = 5) -> None:
        assert tick_ms > 0 and max_burst > 0
        self.tick_ms = tick_ms
        self.max_burst = max_burst
        self._next = now_ms + tick_ms

    def due(self, now_ms: float) -> int:
        if now_ms < self._next:
            return 0
        n = int((now_ms - self._next) // self.tick_ms) + 1
        self._next += n * self.tick_ms
        return min(n, self.max_burst)

    def until_next(self, now_ms: float) -> float:
        return max(0.0, self._next - now_ms)


T = TypeVar("T")


class ProposalTracker(Generic[T]):
    """Matches proposals to committed entries. A proposal at (index, term) succeeded iff the entry
    committed at that index has that term; any other term there means it was lost (a new
    leader overwrote it). Tokens are opaque (the driver uses futures)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending: dict[int, tuple[int, T]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def full(self) -> bool:
        return len(self._pending) >= self.limit

    def add(self, index: int, term: int, token: T) -> None:
        assert index not in self._pending, f"index {index} proposed twice"
        self._pending[index] = (term, token)

    def committed(self, index: int, term: int) -> tuple[T, bool] | None:
        """(token, succeeded) for a proposal at ``index``, or None if there was none."""
        got = self._pending.pop(index, None)
        if got is None:
            return None
        return got[1], got[0] == term

    def drop_through(self, index: int) -> list[T]:
        """Tokens of proposals at or below ``index`` whose fate is unknown (a snapshot covered them)."""
        gone = [i for i in self._pending if i <= index]
        return [self._pending.pop(i)[1] for i in gone]

    def drop_all(self) -> list[T]:
        tokens = [t for _, t in self._pending.values()]
        self._pending.clear()
        return tokens


CommittedListener = Callable[[int, int, str, bytes, int, int], None]
