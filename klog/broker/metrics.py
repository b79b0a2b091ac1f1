"""Prometheus metrics: the broker's counters, a snapshot of its state on each scrape, and the HTTP listener.

Names follow Kafka's JMX metrics as the Prometheus JMX exporter spells them (``kafka.server:type=
BrokerTopicMetrics,name=BytesInPerSec,topic=t`` -> ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``);
consumer lag follows kafka_exporter (``kafka_consumergroup_lag``); what has no Kafka counterpart is ``klog_*``.
docs/metrics.md lists every name.

Three parts, IO at the edges:

* :class:`BrokerMetrics` - counters the event loop bumps: once per request (api key, latency bucket) and
  once per partition of a produce or fetch (bytes, records from the batch header), never per record.
  Plain ints and lists, no locks: only the event loop writes them.
* :func:`take_snapshot` - runs on the event loop when Prometheus scrapes: copies those counters and reads the
  broker's state (connections, partitions and their replicas as Metadata reports them, groups and their
  committed offsets against the log end offsets) into plain data. Cost: O(partitions + committed offsets).
* :class:`MetricsListener` - ``prometheus_client``'s HTTP server on its own thread (``klog.metrics.listener``);
  a scrape asks the loop for a snapshot (``call_soon_threadsafe``) and formats it on that thread, so the
  loop only spends the snapshot's time.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from klog.client.loop_thread import call_in_loop
from klog.metadata.config import parse_listener as parse_listener  # its parser is the config validator's

log = logging.getLogger("klog.broker.metrics")

#: upper bounds (ms) of the request latency histogram buckets (Kafka's TotalTimeMs), +Inf implied
REQUEST_TIME_BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000,
                                              2500, 5000, 10000, 30000)
#: upper bounds (ms) of the log flush time histogram buckets (Kafka's LogFlushRateAndTimeMs)
FLUSH_TIME_BUCKETS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000)
#: a scrape waits this long for the event loop to take the snapshot before answering 503
SNAPSHOT_TIMEOUT_S = 10.0
#: pseudo api key of Fetch requests from followers (Kafka's RequestMetrics "FetchFollower")
FETCH_FOLLOWER_KEY = -1
#: group states reported even when no group is in them (Kafka's NumGroups<State> gauges), so alerts see 0s
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning",
                "Reconciling")


def request_name(api_key: int) -> str:
    """Kafka's RequestMetrics ``request`` tag: the API name in CamelCase (Fetch split by who fetches)."""
    if api_key == 1:
        return "FetchConsumer"
    if api_key == FETCH_FOLLOWER_KEY:
        return "FetchFollower"
    from klog.protocol.messages import ApiKey

    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"ApiKey{api_key}"


class Histogram:
    """Fixed buckets, non-cumulative counts (cumulated on export). ``observe`` is a bisect and two adds."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        assert list(bounds) == sorted(bounds), "bucket bounds must ascend"
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)   # the last is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> tuple[list[tuple[str, int]], float]:
        """Prometheus buckets ``[(le, count <= le), ..., ("+Inf", count)]`` and the sum."""
        out = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out, self.total

    def copy(self) -> Histogram:
        other = Histogram(self.bounds)
        other.counts = list(self.counts)
        other.total = self.total
        return other


class TopicCounters:
    __slots__ = ("bytes_in", "messages_in", "bytes_out", "produce_requests", "fetch_requests")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self.produce_requests = 0
        self.fetch_requests = 0

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        return (self.bytes_in, self.messages_in, self.bytes_out, self.produce_requests, self.fetch_requests)


class BrokerMetrics:
    """The broker's own counters (everything else is read from its state at scrape time)."""

    def __init__(self) -> None:
        #: api key -> request time histogram (ms); its count is the request count
        self.request_time_ms: dict[int, Histogram] = {}
        self.topics: dict[str, TopicCounters] = {}
        self.flush_time_ms = Histogram(FLUSH_TIME_BUCKETS_MS)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.connections_created = 0

    # ---- the hot path: called per request / per partition, on the event loop -------------------------

    def request_done(self, api_key: int, elapsed_s: float) -> None:
        histogram = self.request_time_ms.get(api_key)
        if histogram is None:
            histogram = self.request_time_ms[api_key] = Histogram(REQUEST_TIME_BUCKETS_MS)
        histogram.observe(elapsed_s * 1000.0)

    def requests_done(self, api_key: int, elapsed_ms: list[float]) -> None:
        """Many requests of ``api_key`` done (the native front's), each in its ``elapsed_ms``."""
        histogram = self.request_time_ms.get(api_key)
        if histogram is None:
            histogram = self.request_time_ms[api_key] = Histogram(REQUEST_TIME_BUCKETS_MS)
        observe = histogram.observe
        for ms in elapsed_ms:
            observe(ms)

    #: the request-time histograms' bucket bounds (ms), for counts made elsewhere (:meth:`requests_counted`)
    request_time_bounds = REQUEST_TIME_BUCKETS_MS

    def requests_counted(self, api_key: int, counts: Sequence[int], total_ms: float) -> None:
        """Requests of ``api_key`` already counted into :attr:`request_time_bounds`' buckets (the native wait
        table's answers, summed there): ``counts`` per bucket, the sum of their times in ms."""
        histogram = self.request_time_ms.get(api_key)
        if histogram is None:
            histogram = self.request_time_ms[api_key] = Histogram(REQUEST_TIME_BUCKETS_MS)
        mine = histogram.counts
        for i, n in enumerate(counts):
            if n:
                mine[i] += n
        histogram.total += total_ms

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        counters = self.topics.get(topic) or self.topic(topic)
        counters.bytes_in += nbytes
        counters.messages_in += records
        counters.produce_requests += 1

    def produced_many(self, topic: str, nbytes: int, records: int, batches: int) -> None:
        """``batches`` produced batches of ``topic`` together (the native front's): as many :meth:`produced` calls."""
        counters = self.topics.get(topic) or self.topic(topic)
        counters.bytes_in += nbytes
        counters.messages_in += records
        counters.produce_requests += batches

    def fetched(self, responses: Sequence[Mapping[str, Any]]) -> None:
        """Count a Fetch response's bytes per topic (file regions by length, copied records by size)."""
        for topic_entry in responses:
            if not topic_entry["topic"]:   # an unknown topic id (Fetch v13+; topic names are never empty)
                continue
            nbytes = 0
            for partition in topic_entry["partitions"]:
                records = partition["records"]
                if type(records) is list:
                    for region in records:
                        nbytes += region.length
                else:
                    nbytes += len(records)
            counters = self.topics.get(topic_entry["topic"]) or self.topic(topic_entry["topic"])
            counters.bytes_out += nbytes
            counters.fetch_requests += 1

    def fetched_natively_totals(self, topics: Sequence[tuple[str, int, int]]) -> None:
        """Count many Fetch responses the native path answered, summed per topic: (topic, record bytes, topic
        entries), as :meth:`fetched_natively` counts each."""
        for topic, nbytes, entries in topics:
            counters = self.topics.get(topic) or self.topic(topic)
            counters.bytes_out += nbytes
            counters.fetch_requests += entries

    def fetched_natively(self, topic_bytes: Sequence[tuple[str, int]]) -> None:
        """Count a Fetch response the native path answered as :meth:`fetched` counts one: (topic, record bytes) of
        each of its topic entries."""
        topics = self.topics
        for topic, nbytes in topic_bytes:
            counters = topics.get(topic) or self.topic(topic)
            counters.bytes_out += nbytes
            counters.fetch_requests += 1


# ---- the snapshot (taken on the event loop) -------------------------------------------------------------

@dataclass
class PartitionState:
    topic: str
    partition: int
    leader: int
    replicas: int
    isr: int
    min_isr: int
    size_bytes: int
    start_offset: int
    end_offset: int
    segments: int


@dataclass
class Snapshot:
    node_id: int
    requests: dict[int, Histogram] = field(default_factory=dict)
    topics: dict[str, tuple[int, int, int, int, int]] = field(default_factory=dict)
    flush_time_ms: Histogram = field(default_factory=lambda: Histogram(FLUSH_TIME_BUCKETS_MS))
    connections: dict[str, int] = field(default_factory=dict)
    connections_created: int = 0
    refused_connections: int = 0
    request_queue: int = 0
    writer_queued_bytes: int = 0
    writer_queues: int = 0
    partitions: list[PartitionState] = field(default_factory=list)
    active_controller: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    groups_by_state: dict[str, int] = field(default_factory=dict)
    #: (group, topic, partition, committed offset, lag)
    lag: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    uptime_s: float = 0.0
    offline_log_dirs: int = 0
    fetch_sessions: int = 0
    fetch_session_partitions: int = 0
    fetch_session_evictions: int = 0
    #: (resource type name, operation name) -> requests' checks the authorizer denied (None: no authorizer)
    authorizer_denied: dict[tuple[str, str], int] | None = None
    #: client quotas: quota type (Produce, Fetch, Request) -> (throttled requests, total throttle time ms)
    quota_throttles: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: KIP-714: the points client instances pushed (klog.broker.telemetry.Series), the instances kept, the pushes
    client_metrics: list[Any] = field(default_factory=list)
    telemetry_clients: int = 0
    telemetry_pushes: dict[str, int] = field(default_factory=dict)
    #: Produce requests the native path served whole (the rest took the Python path)
    native_produce_requests: int = 0
    #: share-partitions this broker leads: (group, topic, partition, start offset, {state name: in-flight records})
    share_partitions: list[tuple[str, str, int, int, dict[str, int]]] = field(default_factory=list)
    #: Fetch requests the native path served whole (the rest took the Python path)
    native_fetch_requests: int = 0
    #: of those, incremental fetches of a KIP-227 fetch session
    native_fetch_session_requests: int = 0
    #: long polls parked in the native Fetch path's wait table now
    native_fetch_parked: int = 0
    #: Metadata requests answered with an answer kept encoded (klog/broker/metadata_answers.py)
    metadata_kept_answers: int = 0
    #: Heartbeats answered on the connection without the handler (klog/broker/heartbeat_answers.py)
    heartbeat_fast_answers: int = 0
    #: the wait table's outcomes since start: woken, expired, returned, refused
    native_fetch_waits: dict[str, int] = field(default_factory=dict)


def take_snapshot(server: Any) -> Snapshot:
    """Read every metric out of a running ``BrokerServer``. Must run on its event loop."""
    from klog.broker.handlers.metadata import topic_entry

    state = server.state
    front = getattr(server, "front", None)
    if front is not None:   # what the native front served and has not handed over yet, accounted first
        front.on_ready()
    metrics: BrokerMetrics = server.metrics
    snap = Snapshot(node_id=state.node_id)
    snap.requests = {key: h.copy() for key, h in metrics.request_time_ms.items()}
    topics = state.partitions.topics
    # counters of deleted topics are not reported (Kafka removes a topic's metrics with it)
    snap.topics = {name: c.as_tuple() for name, c in metrics.topics.items() if name in topics}
    snap.flush_time_ms = metrics.flush_time_ms.copy()
    snap.isr_shrinks, snap.isr_expands = metrics.isr_shrinks, metrics.isr_expands
    snap.connections_created = metrics.connections_created
    snap.refused_connections = server.acceptor.refused_connections
    for listener in server.config.listeners:
        snap.connections[listener.name] = 0
    for conn in server.acceptor.connections:
        snap.connections[conn.listener_name] = snap.connections.get(conn.listener_name, 0) + 1
        snap.request_queue += len(conn.frames)
    for writer in server.sends.queues.values():
        queue = writer.queue
        if queue is not None:
            snap.writer_queues += 1
            snap.writer_queued_bytes += queue.queued_bytes
    # Replicas and ISR as Metadata answers them: metrics follow whatever the broker tells clients.
    manager = state.partitions
    for name, topic in list(manager.topics.items()):
        min_isr = topic.effective["min.insync.replicas"]
        for entry in topic_entry(state, None, name, False)["partitions"]:
            index = entry["partition_index"]
            log_ = manager.get(name, index)
            if log_ is None:
                continue
            snap.partitions.append(PartitionState(
                name, index, entry["leader_id"], len(entry["replica_nodes"]), len(entry["isr_nodes"]), min_isr,
                log_.size_in_bytes, log_.log_start_offset, log_.log_end_offset, len(log_.segment_base_offsets())))
    # Kafka's ActiveControllerCount: 1 on the quorum's leader only (a single voter always leads its quorum)
    raft_member = state.metadata.controller
    snap.active_controller = 1 if raft_member is None or raft_member.driver.leader_id == state.node_id else 0
    coordinator = state.coordinator
    if coordinator is not None:
        by_state = dict.fromkeys(GROUP_STATES, 0)
        for group in list(coordinator.groups.values()):
            name = group.state_name()
            by_state[name] = by_state.get(name, 0) + 1
        for group_id in coordinator.offsets.groups():
            # groups that only commit offsets (assign() consumers): Kafka keeps them as Empty groups
            if group_id not in coordinator.groups:
                by_state["Empty"] += 1
            for topic_name, parts in coordinator.offsets.group_offsets(group_id).items():
                for partition, committed in parts.items():
                    log_ = manager.get(topic_name, partition)
                    if log_ is None:
                        continue
                    snap.lag.append((group_id, topic_name, partition, committed.offset,
                                     max(0, log_.high_watermark - committed.offset)))
        snap.groups_by_state = by_state
    shares = getattr(state, "share_partitions", None)
    if shares is not None:
        from klog.broker.share_partitions import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE

        for (group_id, topic_name, partition), sp in list(shares.partitions.items()):
            counts = {name: sp.count(state) for state, name in ((AVAILABLE, "available"), (ACQUIRED, "acquired"),
                                                                 (ACKNOWLEDGED, "acknowledged"),
                                                                 (ARCHIVED, "archived"))}
            snap.share_partitions.append((group_id, topic_name, partition, sp.start_offset, counts))
    snap.uptime_s = time.time() - state.started_at
    sessions = state.fetch_sessions
    snap.fetch_sessions = len(sessions)
    snap.fetch_session_partitions = sessions.partitions_cached()
    snap.fetch_session_evictions = sessions.evictions
    snap.offline_log_dirs = len(state.partitions.offline_dirs)
    access = state.access
    if access is not None:
        from klog.security.acl import AclOperation, ResourceType

        snap.authorizer_denied = {(ResourceType(rtype).name, AclOperation(op).name): count
                                  for (rtype, op), count in sorted(access.denied.items())}
    snap.quota_throttles = state.quotas.throttles()
    telemetry = state.telemetry
    snap.client_metrics = telemetry.series(int(time.time() * 1000))
    snap.telemetry_clients = len(telemetry)
    snap.telemetry_pushes = dict(telemetry.pushes)
    snap.native_produce_requests = server.native_produce_requests
    snap.native_fetch_requests = server.native_fetch_requests
    snap.native_fetch_session_requests = server.native_fetch_session_requests
    answers = state.metadata_answers
    snap.metadata_kept_answers = 0 if answers is None else answers.hits
    heartbeats = state.heartbeat_answers
    snap.heartbeat_fast_answers = 0 if heartbeats is None else heartbeats.hits
    routes = state.partitions.fetch_routes
    if routes is not None:
        parked, woken, expired, returned, refused = routes.wait_stats()
        snap.native_fetch_parked = parked
        snap.native_fetch_waits = {"woken": woken, "expired": expired, "returned": returned, "refused": refused}
    return snap


# ---- export (on the HTTP thread) ------------------------------------------------------------------------

def families(snap: Snapshot) -> Iterator[Any]:
    """The Prometheus metric families of a snapshot."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
        return CounterMetricFamily(name, doc, labels=list(labels))

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
        return GaugeMetricFamily(name, doc, labels=list(labels))

    prefix = "kafka_server_brokertopicmetrics_"
    bytes_in = counter(prefix + "bytesin", "Bytes of record batches appended, by topic (BytesInPerSec)",
                       ("topic",))
    messages_in = counter(prefix + "messagesin", "Records appended, by topic (MessagesInPerSec)", ("topic",))
    bytes_out = counter(prefix + "bytesout", "Record bytes sent to fetchers, by topic (BytesOutPerSec)",
                        ("topic",))
    produce_requests = counter(prefix + "totalproducerequests",
                               "Produce requests per topic (TotalProduceRequestsPerSec)", ("topic",))
    fetch_requests = counter(prefix + "totalfetchrequests", "Fetch requests per topic (TotalFetchRequestsPerSec)",
                             ("topic",))
    for name, (b_in, m_in, b_out, produces, fetches) in sorted(snap.topics.items()):
        bytes_in.add_metric([name], b_in)
        messages_in.add_metric([name], m_in)
        bytes_out.add_metric([name], b_out)
        produce_requests.add_metric([name], produces)
        fetch_requests.add_metric([name], fetches)
    yield from (bytes_in, messages_in, bytes_out, produce_requests, fetch_requests)

    requests = counter("kafka_network_requestmetrics_requests", "Requests answered, by API (RequestsPerSec)",
                       ("request",))
    total_time = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                       "Time from reading a request to queueing its response, ms (TotalTimeMs)",
                                       labels=["request"])
    for key, histogram in sorted(snap.requests.items()):
        name = request_name(key)
        buckets, total = histogram.cumulative()
        requests.add_metric([name], buckets[-1][1])
        total_time.add_metric([name], buckets, total)
    yield requests
    yield total_time

    queue = gauge("kafka_network_requestchannel_requestqueuesize",
                  "Requests received and not yet processed, all connections (RequestQueueSize)")
    queue.add_metric([], snap.request_queue)
    yield queue
    connections = gauge("kafka_server_socketservermetrics_connection_count", "Open client connections",
                        ("listener",))
    for listener, count in sorted(snap.connections.items()):
        connections.add_metric([listener], count)
    yield connections
    created = counter("kafka_server_socketservermetrics_connection_creation",
                      "Client connections accepted (connection-creation-total)")
    created.add_metric([], snap.connections_created)
    refused = counter("klog_network_refused_connections",
                      "Connections refused over max.connections, max.connections.per.ip or the descriptor budget")
    refused.add_metric([], snap.refused_connections)
    yield from (created, refused)
    writer_bytes = gauge("klog_network_writer_queued_bytes",
                         "Response bytes queued on the native writer thread, all connections")
    writer_bytes.add_metric([], snap.writer_queued_bytes)
    if snap.authorizer_denied is not None:
        denied = counter("klog_authorizer_denied", "Checks the ACL authorizer denied, by resource type and "
                         "operation (Kafka logs them in its authorizer log)", ("resource_type", "operation"))
        for (rtype, op), count in sorted(snap.authorizer_denied.items()):
            denied.add_metric([rtype, op], count)
        yield denied
    # Kafka's throttle-time sensors (kafka.server:type=Produce|Fetch|Request,name=throttle-time) as counters
    throttled = counter("klog_quota_throttled_requests", "Requests over their client quota, answered with a "
                        "throttle time (Kafka's throttle-time sensors' count)", ("quota_type",))
    throttle_ms = counter("klog_quota_throttle_time_ms", "Throttle time given to clients over their quota, ms "
                          "(Kafka's throttle-time sensors' total)", ("quota_type",))
    for quota_type, (count, total_ms) in sorted(snap.quota_throttles.items()):
        throttled.add_metric([quota_type], count)
        throttle_ms.add_metric([quota_type], total_ms)
    yield from (throttled, throttle_ms)
    writer_queues = gauge("klog_network_writer_queues", "Connections with a send queue on the native writer thread")
    writer_queues.add_metric([], snap.writer_queues)
    yield from (writer_bytes, writer_queues)
    # which path served the Produce requests (all of them: kafka_network_requestmetrics_requests{request="Produce"})
    native = counter("klog_produce_native_requests", "Produce requests served whole by the native Produce path "
                     "(klog.produce.native.enable); the others took the Python path")
    native.add_metric([], snap.native_produce_requests)
    yield native
    native_fetch = counter("klog_fetch_native_requests", "Fetch requests served whole by the native Fetch path "
                           "(klog.fetch.native.enable); the others took the Python path")
    native_fetch.add_metric([], snap.native_fetch_requests)
    yield native_fetch
    native_session = counter("klog_fetch_native_session_requests", "Of the Fetch requests the native Fetch path "
                             "served, the incremental fetches of a fetch session (KIP-227)")
    native_session.add_metric([], snap.native_fetch_session_requests)
    yield native_session
    parked = gauge("klog_fetch_native_parked", "Long polls (consumers' and replicas') parked in the native Fetch "
                   "path's wait table "
                   "(klog.fetch.native.wait.max.parked)")
    parked.add_metric([], snap.native_fetch_parked)
    yield parked
    waits = counter("klog_fetch_native_waits", "Long polls of the native Fetch path by how their wait ended: woken "
                    "(answered natively after a high watermark moved, or an append for a replica's), expired "
                    "(answered natively at max_wait_ms), "
                    "returned (sent back to the Python path), refused (the wait table full: waited in Python)",
                    labels=("outcome",))
    for outcome, count in snap.native_fetch_waits.items():
        waits.add_metric([outcome], count)
    yield waits
    kept = counter("klog_metadata_kept_answers", "Metadata requests answered with an answer kept encoded from an "
                   "earlier identical request on the same metadata image (no authorizer); the rest of "
                   "kafka_network_requestmetrics_requests_total{request=\"Metadata\"} ran the handler")
    kept.add_metric([], snap.metadata_kept_answers)
    yield kept
    beats = counter("klog_heartbeat_fast_answers", "Heartbeats of classic groups answered on the connection (a "
                    "member of a Stable group at its generation) without the handler; the rest of "
                    "kafka_network_requestmetrics_requests_total{request=\"Heartbeat\"} ran it")
    beats.add_metric([], snap.heartbeat_fast_answers)
    yield beats

    rm = "kafka_server_replicamanager_"
    partition_count = gauge(rm + "partitioncount", "Partitions with a replica on this broker (PartitionCount)")
    partition_count.add_metric([], len(snap.partitions))
    leader_count = gauge(rm + "leadercount", "Partitions this broker leads (LeaderCount)")
    leader_count.add_metric([], sum(1 for p in snap.partitions if p.leader == snap.node_id))
    under_replicated = gauge(rm + "underreplicatedpartitions",
                             "Led partitions whose ISR is smaller than their replica set (UnderReplicatedPartitions)")
    under_replicated.add_metric([], sum(1 for p in snap.partitions
                                        if p.leader == snap.node_id and p.isr < p.replicas))
    under_min_isr = gauge(rm + "underminisrpartitioncount",
                          "Led partitions whose ISR is smaller than min.insync.replicas (UnderMinIsrPartitionCount)")
    under_min_isr.add_metric([], sum(1 for p in snap.partitions if p.leader == snap.node_id and p.isr < p.min_isr))
    shrinks = counter(rm + "isrshrinks", "ISR shrinks (IsrShrinksPerSec)")
    shrinks.add_metric([], snap.isr_shrinks)
    expands = counter(rm + "isrexpands", "ISR expansions (IsrExpandsPerSec)")
    expands.add_metric([], snap.isr_expands)
    yield from (partition_count, leader_count, under_replicated, under_min_isr, shrinks, expands)
    offline = gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                    "Partitions without a leader (OfflinePartitionsCount)")
    offline.add_metric([], sum(1 for p in snap.partitions if p.leader < 0))
    controller = gauge("kafka_controller_kafkacontroller_activecontrollercount",
                       "1 on the broker that is the active controller (ActiveControllerCount)")
    controller.add_metric([], snap.active_controller)
    yield from (offline, controller)

    fs = "kafka_server_fetchsessioncache_"
    sessions = gauge(fs + "numincrementalfetchsessions", "KIP-227 fetch sessions kept (NumIncrementalFetchSessions)")
    sessions.add_metric([], snap.fetch_sessions)
    cached = gauge(fs + "numincrementalfetchpartitionscached",
                   "Partitions held by the fetch sessions kept (NumIncrementalFetchPartitionsCached)")
    cached.add_metric([], snap.fetch_session_partitions)
    evictions = counter(fs + "incrementalfetchsessionevictions",
                        "Fetch sessions evicted for a newcomer (IncrementalFetchSessionEvictionsPerSec)")
    evictions.add_metric([], snap.fetch_session_evictions)
    yield from (sessions, cached, evictions)

    size = gauge("kafka_log_log_size", "Bytes of a partition's log segments (Log Size)", ("topic", "partition"))
    start = gauge("kafka_log_log_logstartoffset", "First offset of a partition's log", ("topic", "partition"))
    end = gauge("kafka_log_log_logendoffset", "Next offset of a partition's log", ("topic", "partition"))
    segments = gauge("kafka_log_log_numlogsegments", "Segments of a partition's log", ("topic", "partition"))
    for p in snap.partitions:
        labels = [p.topic, str(p.partition)]
        size.add_metric(labels, p.size_bytes)
        start.add_metric(labels, p.start_offset)
        end.add_metric(labels, p.end_offset)
        segments.add_metric(labels, p.segments)
    offline_dirs = gauge("kafka_log_logmanager_offlinelogdirectorycount",
                         "Log dirs taken offline by a write error (OfflineLogDirectoryCount)")
    offline_dirs.add_metric([], snap.offline_log_dirs)
    yield from (size, start, end, segments, offline_dirs)
    flush_buckets, flush_total = snap.flush_time_ms.cumulative()
    flush = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                  "Time of each flush pass that fsynced at least one log, ms "
                                  "(LogFlushRateAndTimeMs)")
    flush.add_metric([], flush_buckets, flush_total)
    yield flush

    groups = gauge("kafka_coordinator_group_groupmetadatamanager_numgroups",
                   "Consumer groups by state (NumGroups, NumGroups<State>)", ("state",))
    for group_state, count in sorted(snap.groups_by_state.items()):
        groups.add_metric([group_state], count)
    yield groups
    lag = gauge("kafka_consumergroup_lag", "High watermark minus the group's committed offset",
                ("consumergroup", "topic", "partition"))
    current = gauge("kafka_consumergroup_current_offset", "The group's committed offset",
                    ("consumergroup", "topic", "partition"))
    for group_id, topic, partition, committed, behind in snap.lag:
        labels = [group_id, topic, str(partition)]
        lag.add_metric(labels, behind)
        current.add_metric(labels, committed)
    yield from (lag, current)
    share_records = gauge("klog_share_partition_records",
                          "In-flight records of a share-partition this broker leads, by state (KIP-932)",
                          ("group", "topic", "partition", "state"))
    share_start = gauge("klog_share_partition_start_offset",
                        "Start offset of a share-partition this broker leads (KIP-932)",
                        ("group", "topic", "partition"))
    for group_id, topic, partition, start_offset, counts in snap.share_partitions:
        share_start.add_metric([group_id, topic, str(partition)], start_offset)
        for record_state, count in counts.items():
            share_records.add_metric([group_id, topic, str(partition), record_state], count)
    yield from (share_records, share_start)
    uptime = gauge("klog_broker_uptime_seconds", "Seconds since the broker started")
    uptime.add_metric([], snap.uptime_s)
    yield uptime
    yield from client_metric_families(snap)


def client_metric_families(snap: Snapshot) -> Iterator[Any]:
    """KIP-714: what clients pushed, one family per metric name (OTLP name with ``_`` for ``.``; monotonic sums
    as counters), labelled by client instance, client id, software and address, and by the point's attributes."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from klog.broker.telemetry import prometheus_name

    clients = GaugeMetricFamily("klog_client_telemetry_instances",
                                "Client instances (KIP-714) whose pushed metrics the broker keeps")
    clients.add_metric([], snap.telemetry_clients)
    pushes = CounterMetricFamily("klog_client_telemetry_pushes", "PushTelemetry requests by outcome "
                                 "(accepted or the error answered)", labels=["result"])
    for outcome, count in sorted(snap.telemetry_pushes.items()):
        pushes.add_metric([outcome], count)
    yield from (clients, pushes)
    by_family: dict[tuple[str, str], list[Any]] = {}
    for series in snap.client_metrics:
        by_family.setdefault((prometheus_name(series.name), series.kind), []).append(series)
    for (name, kind), members in sorted(by_family.items()):
        if kind == "counter" and name.endswith("_total"):
            name = name[:-len("_total")]
        labels: list[str] = []
        for series in members:
            labels += [label for label, _ in series.labels if label not in labels]
        family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        family = family_type(name, f"client metric {members[0].name} (KIP-714)", labels=labels)
        for series in members:
            values = dict(series.labels)
            family.add_metric([values.get(label, "") for label in labels], series.value)
        yield family


class _SnapshotCollector:
    """A prometheus_client collector that takes a snapshot on the broker's event loop per scrape."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def collect(self) -> Iterator[Any]:
        # an exception is raised again here, in the scrape, which answers 500
        yield from families(call_in_loop(self.server.loop, take_snapshot, self.server, timeout=SNAPSHOT_TIMEOUT_S))


class MetricsListener:
    """``/metrics`` over HTTP on a thread of its own (prometheus_client's server)."""

    def __init__(self, server: Any, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        self.registry.register(_SnapshotCollector(server))  # type: ignore[arg-type]
        self._httpd, self._thread = start_http_server(port, addr=host or "0.0.0.0", registry=self.registry)
        self.address: tuple[str, int] = self._httpd.server_address[:2]  # type: ignore[assignment]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
