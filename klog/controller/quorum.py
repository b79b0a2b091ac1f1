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
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from klog.metadata.storage import INITIAL_VOTERS_COPY

if TYPE_CHECKING:
    import uuid

    from klog.client.security import ClientSecurity
    from klog.controller.listener_login import LoginSettings

    from klog.metadata.config import BrokerConfig

#: Ticks per election timeout: the tick is election.timeout.ms / this.
TICKS_PER_ELECTION_TIMEOUT = 10
#: Leader heartbeat period, in ticks (raft-rs needs it below election_tick).
HEARTBEAT_TICKS = 2
#: Preamble a raft peer connection starts with, then the sender's node id (int32 BE). A Kafka
#: request would start with a 4-byte size; "KLRA" read as one (1.2 GB) is never valid, so a
#: shared controller listener can tell the two apart from the first four bytes.
RAFT_PREAMBLE = b"KLRAFT\x00\x01"
#: An observer not heard from for this long leaves DescribeQuorum's answer (Kafka's observer session, 5 minutes).
OBSERVER_SESSION_MS = 300_000


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


def parse_bootstrap_servers(value: str, key: str = "controller.quorum.bootstrap.servers") -> tuple[tuple[str, int], ...]:
    """Parse ``host:port,host:port`` (KIP-853's bootstrap servers)."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        host, colon, port = item.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise QuorumConfigError(f"{key}: {item!r} is not <host>:<port>")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise QuorumConfigError(f"{key} is empty")
    return tuple(out)


def quorum_endpoints(config: BrokerConfig) -> tuple[dict[int, Voter], tuple[tuple[str, int], ...]]:
    """(static voters, bootstrap servers) of a node's properties: exactly one of ``controller.quorum.voters`` and
    ``controller.quorum.bootstrap.servers`` is set (the other is empty)."""
    voters, bootstrap = config["controller.quorum.voters"], config["controller.quorum.bootstrap.servers"]
    if voters and bootstrap:
        raise QuorumConfigError("controller.quorum.bootstrap.servers: set either controller.quorum.voters (a static "
                                "quorum) or controller.quorum.bootstrap.servers (KIP-853), not both")
    if not voters and not bootstrap:
        raise QuorumConfigError("controller.quorum.voters: a node of a multi-node cluster needs "
                                "controller.quorum.voters or controller.quorum.bootstrap.servers")
    if voters:
        return parse_voters(",".join(voters)), ()
    return {}, parse_bootstrap_servers(",".join(bootstrap))


@dataclasses.dataclass(frozen=True)
class ControllerListenerSecurity:
    """How a node serves and reaches the controller listener (the first of ``controller.listener.names``)."""

    #: the protocol from ``listener.security.protocol.map``
    protocol: str = "PLAINTEXT"
    #: what an SSL/SASL_SSL controller listener serves with (this node serves it), else None
    server_ssl: ssl.SSLContext | None = None
    #: a SASL controller listener's login (this node serves it), else None
    login: LoginSettings | None = None
    #: what every connection to a controller listener uses (TLS context, SASL mechanism and credentials: a
    #: klog.client.security.ClientSecurity), None for PLAINTEXT
    client: ClientSecurity | None = None


def controller_listener_security(config: BrokerConfig, *, server: bool,
                                 dynamic_of: Callable[[], Mapping[str, str]] | None = None
                                 ) -> ControllerListenerSecurity:
    """The controller listener's security from its ``ssl.*``/``sasl.*`` settings (``listener.name.<l>.*`` first), as
    Kafka configures it: TLS for SSL and SASL_SSL; for SASL_PLAINTEXT and SASL_SSL a login with
    ``sasl.mechanism.controller.protocol`` and the ``username``/``password`` of that mechanism's JAAS config on the
    listener (``listener.name.<l>.<mechanism>.sasl.jaas.config``). Every connection to a controller listener (Raft
    peers, observers, the brokers' lifecycle requests and forwarding, DescribeQuorum) uses ``client``; ``server``:
    this node serves the listener. SSL with ``ssl.client.auth=required`` authenticates every peer by its certificate
    (mTLS). ``dynamic_of()``: the listener's dynamic ssl.* settings of this node (its ConfigRecords): what it serves
    and presents on new connections follows them (:class:`klog.security.tls.DynamicTls`); None: the static settings.
    A QuorumConfigError names a setting that cannot be used."""
    from klog.client.security import ClientSecurity
    from klog.controller.listener_login import login_settings
    from klog.metadata.config import SASL_MECHANISMS, ConfigError
    from klog.security.sasl import parse_jaas
    from klog.security.tls import DynamicTls, TlsConfigError, client_context, server_context

    names = [str(n).strip().upper() for n in (config["controller.listener.names"] or []) if str(n).strip()]
    if not names:
        return ControllerListenerSecurity()
    name = names[0]
    listed = {lst.name: lst for lst in config.controller_listeners}
    if name in listed:
        protocol = listed[name].security_protocol
    else:   # a broker-only node: the map names the controllers' listener protocol
        mapping = dict(str(e).partition(":")[::2] for e in str(config["listener.security.protocol.map"]).split(",")
                       if e.strip())
        protocol = {k.strip().upper(): v.strip().upper() for k, v in mapping.items()}.get(name, name)
    if protocol == "PLAINTEXT":
        return ControllerListenerSecurity()
    if protocol not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise QuorumConfigError(f"listener.security.protocol.map: controller listener {name} uses {protocol}, not "
                                "one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    settings = config.listener_security(name)
    server_ssl = client_ssl = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            server_ssl = server_context(settings) if server else None
            client_ssl = client_context(settings)
        except TlsConfigError as exc:
            raise QuorumConfigError(f"{exc.key}: controller listener {name} ({protocol}): "
                                    f"{str(exc).partition(': ')[2]}") from None
    source = None
    if client_ssl is not None and dynamic_of is not None:
        dynamic = DynamicTls(name, settings, dynamic_of, server=server_ssl)
        if server_ssl is not None:
            dynamic.serve()
        source = dynamic.client
    if protocol == "SSL":
        return ControllerListenerSecurity(protocol, server_ssl, None, ClientSecurity("SSL", client_ssl, None, None,
                                                                                     None, tls_source=source))
    key = "sasl.mechanism.controller.protocol"
    mechanism = str(config[key]).strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise QuorumConfigError(f"{key}: {mechanism}: controller listener {name} is {protocol}; nodes log in to it "
                                f"with one of {', '.join(SASL_MECHANISMS)} (PLAIN, as Kafka advises: SCRAM "
                                "credentials live in the metadata log the controllers must first agree on)")
    jaas_key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_setting(name, "sasl.jaas.config", mechanism)
    try:
        options = parse_jaas(text).options if text else {}
    except ValueError as exc:
        raise QuorumConfigError(f"{jaas_key}: {exc}") from None
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise QuorumConfigError(f"{jaas_key}: nodes log in to controller listener {name} with {mechanism}: its JAAS "
                                "config needs username=\"...\" password=\"...\"")
    login = None
    if server:
        try:
            login = login_settings(config, name, protocol)
        except ConfigError as exc:
            raise QuorumConfigError(f"{exc.key}: {str(exc).partition(': ')[2]}") from None
        if mechanism not in login.mechanisms:
            raise QuorumConfigError(f"{key}: {mechanism} is not among the mechanisms controller listener {name} "
                                    f"offers ({', '.join(login.mechanisms)}): set listener.name.{name.lower()}."
                                    "sasl.enabled.mechanisms")
    return ControllerListenerSecurity(protocol, server_ssl, login,
                                      ClientSecurity(protocol, client_ssl, mechanism, username, password,
                                                     tls_source=source))


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
    max_observer_feed_bytes: int = 16 << 20  # latest committed entries kept for observers (older: a snapshot)
    #: klog.controller.max.records.per.batch: more records of one operation are a KIP-868 metadata transaction
    max_records_per_batch: int = 10_000
    reconnect_backoff_ms: int = 50  # first retry after a failed connection, doubling ...
    reconnect_backoff_max_ms: int = 1000  # ... up to this
    #: where raft peers connect (the controller listener); None: this node's voter endpoint
    bind_host: str | None = None
    bind_port: int | None = None
    segment_bytes: int = 1 << 30  # metadata.log.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # metadata.log.segment.ms
    #: KIP-853: the voter set was formatted (controller.quorum.bootstrap.servers), so AddRaftVoter /
    #: RemoveRaftVoter change it; False: a static controller.quorum.voters quorum (kraft.version 0)
    dynamic_voters: bool = False
    #: this controller joins a running quorum (formatted with --no-initial-controllers): ``voters`` holds only its
    #: own endpoint (plus what it learnt), the raft voters are ``joining_voters`` (None: not learnt yet, ask the
    #: ``bootstrap_servers`` with DescribeQuorum)
    joining: bool = False
    joining_voters: tuple[int, ...] | None = None
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    #: controller.quorum.auto.join.enable: while its voter key is not a voter, this controller asks the leader
    #: itself to add it (and first to remove a voter holding its node id under another directory id)
    auto_join: bool = False
    listener_name: str = "CONTROLLER"
    #: KIP-853: the directory ids of the formatted initial voters (their voter keys; a static quorum has none)
    initial_directory_ids: Mapping[int, Any] = dataclasses.field(default_factory=dict)
    #: KIP-853: the initial voters' endpoints as formatted (this voter's own may have changed since: it tells the
    #: leader with UpdateRaftVoter)
    formatted_voters: Mapping[int, Voter] = dataclasses.field(default_factory=dict)
    #: an SSL/SASL_SSL controller listener's TLS context (ssl.SSLContext; None: no TLS)
    server_ssl: ssl.SSLContext | None = dataclasses.field(default=None, compare=False)
    #: a SASL controller listener's login settings (None: no login)
    server_login: LoginSettings | None = dataclasses.field(default=None, compare=False)
    #: what this node connects to the other controllers' listeners with (TLS and SASL login; None: PLAINTEXT)
    client_security: ClientSecurity | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def from_broker_config(cls, config: BrokerConfig, *, dynamic_ssl: Callable[[], Mapping[str, str]] | None = None
                           ) -> QuorumConfig:
        """The quorum settings of a ``klog-broker`` whose properties name a static quorum
        (``controller.quorum.voters``) and give it a controller role. ``dynamic_ssl()``: the controller listener's
        dynamic ssl.* settings of this node (:func:`controller_listener_security`). Misconfiguration names the
        key."""
        if "controller" not in config.roles:
            raise QuorumConfigError("process.roles: a node without the controller role is not a quorum member (a "
                                    "process.roles=broker node follows the quorum as an observer)")
        if not config.controller_listeners:
            raise QuorumConfigError("controller.listener.names: a controller needs a listener named there and "
                                    "present in listeners")
        listener = config.controller_listeners[0]
        security = controller_listener_security(config, server=True, dynamic_of=dynamic_ssl)
        voters, bootstrap = quorum_endpoints(config)
        dynamic = joining = False
        joining_voters: tuple[int, ...] | None = None
        directory_ids: dict[int, Any] = {}
        formatted: dict[int, Voter] = {}
        if not voters:   # KIP-853: the initial voter set klog-broker format wrote
            import os

            metadata_dir = os.path.abspath(config["metadata.log.dir"] or config.log_dirs[0])
            initial = read_initial_voter_set(metadata_dir, listener.name)
            found = None if initial is None else {v.node_id: Voter(v.node_id, v.host, v.port) for v in initial}
            directory_ids = {v.node_id: v.directory_id for v in initial or []}
            joining = found is None or config.node_id not in found
            if found is None and not os.path.exists(os.path.join(metadata_dir, "meta.properties")):
                raise QuorumConfigError(
                    f"controller.quorum.bootstrap.servers: {metadata_dir} is not formatted; format this controller "
                    "with klog-broker format --standalone or --initial-controllers (a new quorum), or "
                    "--no-initial-controllers (to join a running quorum with kafka-metadata-quorum add-controller)")
            dynamic = True
            if found is None or config.node_id not in found:
                # KIP-853: a controller joining a running quorum; it learns the voters from the bootstrap servers
                # (found None) or did so at its first start, and votes once AddRaftVoter made it a voter
                joining_voters = None if found is None else tuple(sorted(found))
                found = {**(found or {}),
                         config.node_id: Voter(config.node_id, listener.host or "localhost", listener.port)}
            elif listener.port:
                # an initial voter serves where its listener says (moved since format: it tells the leader with
                # UpdateRaftVoter)
                formatted = dict(found)
                host = listener.host if listener.host not in ("", "0.0.0.0", "::") else found[config.node_id].host
                found = {**found, config.node_id: Voter(config.node_id, host, listener.port)}
            voters = found
        me = voters.get(config.node_id)
        if me is None:
            raise QuorumConfigError(f"node.id {config.node_id} is not among controller.quorum.voters {sorted(voters)} "
                                    "(or the initial voters klog-broker format wrote)")
        if listener.port not in (0, me.port):
            raise QuorumConfigError(f"listeners: controller listener {listener.name} is on port {listener.port} but "
                                    f"controller.quorum.voters gives node {me.node_id} port {me.port}")
        cfg = cls(node_id=config.node_id, voters=voters,
                  election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                  fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                  election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
                  bind_host=listener.host or "0.0.0.0", bind_port=me.port,
                  reconnect_backoff_ms=config["controller.quorum.retry.backoff.ms"],
                  segment_bytes=config["metadata.log.segment.bytes"], segment_ms=config["metadata.log.segment.ms"],
                  max_records_per_batch=config["klog.controller.max.records.per.batch"],
                  dynamic_voters=dynamic, joining=joining, joining_voters=joining_voters,
                  bootstrap_servers=bootstrap, auto_join=bool(config["controller.quorum.auto.join.enable"]),
                  listener_name=listener.name, initial_directory_ids=directory_ids,
                  formatted_voters=formatted, server_ssl=security.server_ssl,
                  server_login=security.login, client_security=security.client)
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


# -- KIP-853: the initial voter set ``klog-broker format`` writes --------------------------------------------------
#: The bootstrap snapshot of ``__cluster_metadata-0`` in which ``kafka-storage format --standalone`` /
#: ``--initial-controllers`` writes the initial voter set (a KRaftVersionRecord and a VotersRecord), as klog does.
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
#: klog's tagged field of a SnapshotHeaderRecord: (raft index, end offset), see rust/klog-core/src/raft/control.rs.
SNAPSHOT_POSITION_TAG = 10_002


@dataclasses.dataclass(frozen=True)
class InitialVoter:
    node_id: int
    directory_id: uuid.UUID
    host: str
    port: int


def parse_initial_controllers(value: str, key: str = "--initial-controllers") -> list[InitialVoter]:
    """Kafka's ``id@host:port:directoryId,...`` (the directory id a Kafka Uuid: 22 characters of URL-safe base64)."""
    from klog.metadata.storage import parse_kafka_uuid

    out: list[InitialVoter] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        head, _, directory = item.rpartition(":")
        try:
            directory_id = parse_kafka_uuid(directory)
        except ValueError:
            raise QuorumConfigError(f"{key}: {item!r} does not end with a directory id (klog-broker random-uuid "
                                    "makes one)") from None
        voter = parse_voters(head, key)
        ((node_id, v),) = voter.items()
        if any(o.node_id == node_id for o in out):
            raise QuorumConfigError(f"{key}: node id {node_id} is listed twice")
        out.append(InitialVoter(node_id, directory_id, v.host, v.port))
    if not out:
        raise QuorumConfigError(f"{key} is empty")
    return out


def write_initial_voters(metadata_dir: str, voters: list[InitialVoter], listener: str) -> str:
    """Write the bootstrap snapshot with the initial voter set (kraft.version 1) into ``__cluster_metadata-0`` of
    ``metadata_dir``, and its copy; returns the snapshot's path."""
    import os
    import struct

    from klog.metadata.records import control, encode_batch

    header = control("SnapshotHeaderRecord", version=0, last_contained_log_timestamp=0,
                     _unknown_tags={SNAPSHOT_POSITION_TAG: struct.pack(">Qq", 0, 0)})
    voters_record = control("VotersRecord", version=0, voters=[
        {"voter_id": v.node_id, "voter_directory_id": v.directory_id,
         "endpoints": [{"name": listener, "host": v.host, "port": v.port}],
         "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}} for v in voters])
    # one control record per batch: klog's raft storage reads the first record of each control batch
    records = [header, control("KRaftVersionRecord", version=0, kraft_version=1), voters_record,
               control("SnapshotFooterRecord", version=0)]
    data = b"".join(encode_batch([r], base_offset=i, epoch=0) for i, r in enumerate(records))
    partition_dir = os.path.join(metadata_dir, "__cluster_metadata-0")
    os.makedirs(partition_dir, exist_ok=True)
    path = os.path.join(partition_dir, BOOTSTRAP_SNAPSHOT)
    for target in (os.path.join(metadata_dir, INITIAL_VOTERS_COPY), path):
        tmp = target + ".part"
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    return path


def replaced_voter(node_id: int, voters: Iterable[int], directory_ids: Mapping[int, Any],
                   own_directory_id: Any) -> bool:
    """KIP-853: whether the voter set holds ``node_id`` under a directory id other than this disk's
    (``own_directory_id``; None: not formatted): the disk was replaced and reformatted, so this node's voter key is
    not a voter and it joins as an observer (an unknown, zero directory id names any disk)."""
    held = directory_ids.get(node_id)
    return (node_id in set(voters) and own_directory_id is not None and held is not None and held.int != 0
            and held != own_directory_id)


def read_initial_voters(metadata_dir: str, listener: str) -> dict[int, Voter] | None:
    """The initial voter set ``format`` wrote into ``metadata_dir`` (each voter's endpoint on ``listener``), None
    if there is none."""
    found = read_initial_voter_set(metadata_dir, listener)
    return None if found is None else {v.node_id: Voter(v.node_id, v.host, v.port) for v in found}


def read_initial_voter_set(metadata_dir: str, listener: str) -> list[InitialVoter] | None:
    """The initial voters ``format`` wrote into ``metadata_dir`` with their directory ids (KIP-853's voter keys),
    None if there are none."""
    import os

    from klog.metadata.records import ControlRecordType, decode_batches

    path = os.path.join(metadata_dir, INITIAL_VOTERS_COPY)
    try:
        with open(path, "rb") as handle:
            batches = decode_batches(handle.read())
    except FileNotFoundError:
        return None
    for b in batches:
        for rec in b.records:
            if b.is_control and rec.type == ControlRecordType.KRAFT_VOTERS:
                voters: list[InitialVoter] = []
                for v in rec.data.voters:
                    ends = [e for e in v.endpoints if e.name.upper() == listener.upper()]
                    if not ends:
                        raise QuorumConfigError(f"controller.listener.names: voter {v.voter_id} in {path} has no "
                                                f"endpoint on listener {listener}")
                    voters.append(InitialVoter(v.voter_id, v.voter_directory_id, ends[0].host, ends[0].port))
                return voters
    raise QuorumConfigError(f"controller.quorum.bootstrap.servers: {path} holds no VotersRecord")
