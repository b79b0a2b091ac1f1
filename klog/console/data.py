"""What the console shows, read from any Kafka-compatible cluster with klog's own client.

:class:`ClusterView` asks the cluster (Metadata, DescribeCluster, DescribeConfigs, ListOffsets, ListGroups,
DescribeGroups, OffsetFetch; ShareGroupDescribe and DescribeShareGroupOffsets for share groups) and returns plain
dicts for the templates. :class:`MetricsSource` reads a klog broker's Prometheus endpoint (optional): topic
byte/message rates, partition sizes and share-partitions' in-flight records by state. The sampler
(:meth:`ClusterView.sample`) runs on a timer thread and feeds the lag and rate histories.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import defaultdict
from typing import Any

from klog.console.history import History, Rates

log = logging.getLogger("klog.console")

#: records one browse returns at most (a page stays small; page on with "next")
MAX_BROWSE_RECORDS = 500
#: how long a browse waits for records before answering with what it has
BROWSE_WAIT_S = 1.5
#: a metrics scrape gives up after this long
METRICS_TIMEOUT_S = 5.0
#: the per-topic counters turned into rate sparklines
RATE_COUNTERS = {
    "kafka_server_brokertopicmetrics_bytesin_total": "bytes_in",
    "kafka_server_brokertopicmetrics_messagesin_total": "messages_in",
    "kafka_server_brokertopicmetrics_bytesout_total": "bytes_out",
}


def split_client_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Client properties (``--command-config``) as (admin settings, consumer settings): a properties file serves
    both kinds of client, as with Kafka's tools; a key neither knows is an error naming it."""
    from klog.client.config import ADMIN_CONFIG, CONSUMER_CONFIG

    admin_keys = {d.name for d in ADMIN_CONFIG}
    consumer_keys = {d.name for d in CONSUMER_CONFIG} - {"group.id", "auto.offset.reset", "bootstrap.servers"}
    unknown = sorted(set(config) - admin_keys - consumer_keys - {"bootstrap.servers"})
    if unknown:
        raise ValueError(f"unknown client config {unknown[0]!r} (the console takes admin and consumer settings)")
    admin = {"client.id": "klog-console", **{k: v for k, v in config.items() if k in admin_keys - {"bootstrap.servers"}}}
    consumer = {"client.id": "klog-console", **{k: v for k, v in config.items() if k in consumer_keys}}
    return admin, consumer


class MetricsSource:
    """A klog broker's ``/metrics`` (or any endpoint with the same names): rates and partition sizes."""

    def __init__(self, urls: list[str], history: History) -> None:
        self.urls = urls
        self.rates = Rates(history)
        self.history = history
        #: (topic, partition) -> bytes, from the last scrape
        self.sizes: dict[tuple[str, int], float] = {}
        #: (group, topic, partition) -> record state -> in-flight records (klog_share_partition_records)
        self.share_records: dict[tuple[str, str, int], dict[str, int]] = {}
        self.last_error: str | None = None

    def scrape(self, now: float) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        totals: dict[tuple[str, str], float] = defaultdict(float)
        sizes: dict[tuple[str, int], float] = {}
        share_records: dict[tuple[str, str, int], dict[str, int]] = defaultdict(dict)
        try:
            for url in self.urls:
                with urllib.request.urlopen(url, timeout=METRICS_TIMEOUT_S) as response:
                    text = response.read().decode("utf-8")
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        kind = RATE_COUNTERS.get(sample.name)
                        if kind is not None:
                            totals[(sample.labels.get("topic", ""), kind)] += sample.value
                        elif sample.name == "kafka_log_log_size":
                            key = (sample.labels["topic"], int(sample.labels["partition"]))
                            sizes[key] = sizes.get(key, 0.0) + sample.value
                        elif sample.name == "klog_share_partition_records":
                            labels = sample.labels
                            counts = share_records[(labels["group"], labels["topic"], int(labels["partition"]))]
                            counts[labels["state"]] = counts.get(labels["state"], 0) + int(sample.value)
        except (OSError, ValueError) as exc:
            self.last_error = f"{exc}"
            log.warning("metrics scrape failed: %s", exc)
            return
        self.last_error = None
        self.sizes = sizes
        self.share_records = dict(share_records)
        for (topic, kind), value in totals.items():
            self.rates.observe(("rate", topic, kind), now, value)

    def rate_values(self, topic: str, kind: str) -> list[float]:
        return self.history.values(("rate", topic, kind))


#: how the pages write a quota's default entity (None in the protocol)
DEFAULT_ENTITY = "<default>"


def refused_by_acls(exc: Any) -> bool:
    """Whether a cluster error is an authorization refusal (TOPIC_/GROUP_/CLUSTER_..._AUTHORIZATION_FAILED)."""
    return str(exc.name).endswith("AUTHORIZATION_FAILED")


class ClusterView:
    """The cluster as the pages show it. Thread-safe (the HTTP server calls it from many threads)."""

    def __init__(self, bootstrap_servers: str, *, metrics_urls: list[str] | None = None,
                 client_config: dict[str, Any] | None = None, history: History | None = None,
                 metrics: MetricsSource | None = None) -> None:
        """``history`` and ``metrics``: shared with another view (a login session's view shows the charts the
        console's sampler keeps); otherwise this view's own, from ``metrics_urls``."""
        from klog.client import AdminClient, Consumer

        self.bootstrap_servers = bootstrap_servers
        self.admin_config, self.client_config = split_client_config(client_config or {})
        self.admin = AdminClient(bootstrap_servers, **self.admin_config)
        try:
            #: ListOffsets (log start/end, by timestamp) without a group
            self._offsets = Consumer(bootstrap_servers=bootstrap_servers, group_id=None, **self.client_config)
        except BaseException:
            self.admin.close()
            raise
        self._offsets_lock = threading.Lock()
        #: made on the first produce action
        self._producer: Any = None
        self._producer_lock = threading.Lock()
        self.history = history or History()
        self.metrics = metrics if metrics is not None else (
            MetricsSource(metrics_urls, self.history) if metrics_urls else None)
        #: False once the cluster answered that it has no DescribeLogDirs (sizes then come from the metrics)
        self._log_dirs_supported = True
        #: the share groups (KIP-932) the last ListGroups named: their offsets are share-partition start offsets
        self._share_groups: set[str] = set()

    def close(self) -> None:
        self._offsets.close(autocommit=False)
        self.admin.close()
        if self._producer is not None:
            self._producer.close()

    def produce(self, topic: str, *, partition: int | None, key: bytes | None, value: bytes,
                headers: list[tuple[str, bytes]]) -> Any:
        """One record (the console's produce action), acknowledged by all in-sync replicas: its RecordMetadata."""
        from klog.client import Producer
        from klog.client.config import PRODUCER_CONFIG

        with self._producer_lock:
            if self._producer is None:
                known = {d.name for d in PRODUCER_CONFIG}
                settings = {k: v for k, v in self.admin_config.items() if k in known}
                self._producer = Producer(self.bootstrap_servers, **{**settings, "acks": "all"})
            producer = self._producer
        future = producer.send(topic, value=value, key=key, headers=headers, partition=partition)
        producer.flush()
        return future.result()

    # ---- offsets ----------------------------------------------------------------------------------------

    def offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start offset, log end offset) per partition."""
        if not partitions:
            return {}
        with self._offsets_lock:
            starts = self._offsets.beginning_offsets(partitions)
            ends = self._offsets.end_offsets(partitions)
        return {(tp.topic, tp.partition): (starts.get(tp, -1), ends[tp]) for tp in ends}

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        with self._offsets_lock:
            found = self._offsets.offsets_for_times({(topic, partition): timestamp_ms})
        hit = next(iter(found.values()), None)
        return None if hit is None else hit.offset

    # ---- cluster ----------------------------------------------------------------------------------------

    def cluster_operations(self) -> frozenset[str] | None:
        """What the client's principal may do on the cluster (DescribeCluster's authorized operations, lower-case
        names), or None when the cluster does not say."""
        ops: frozenset[str] | None = self.admin.describe_cluster(include_authorized_operations=True)[
            "authorized_operations"]
        return ops

    def overview(self) -> dict[str, Any]:
        cluster = self.admin.describe_cluster()
        topics = self.admin.describe_topics(self.admin.list_topics(internal=True))
        partitions = [p for t in topics.values() for p in t.partitions]
        groups = self.admin.list_groups()
        states: dict[str, int] = defaultdict(int)
        for group in groups:
            states[group.state or "Unknown"] += 1
        leaders: dict[int, int] = defaultdict(int)
        for p in partitions:
            leaders[p.leader] += 1
        brokers = [{"id": node, "host": host, "port": port, "rack": rack, "leader_for": leaders.get(node, 0),
                    "controller": node == cluster["controller_id"]}
                   for node, host, port, rack in sorted(cluster["brokers"])]
        return {
            "cluster_id": cluster["cluster_id"], "controller_id": cluster["controller_id"], "brokers": brokers,
            "topics": sum(1 for t in topics.values() if not t.is_internal),
            "internal_topics": sum(1 for t in topics.values() if t.is_internal),
            "partitions": len(partitions),
            "under_replicated": sum(1 for p in partitions if len(p.isr) < len(p.replicas)),
            "offline": sum(1 for p in partitions if p.leader < 0),
            "groups": len(groups), "group_states": dict(sorted(states.items())),
        }

    def topics(self, *, internal: bool = False) -> list[dict[str, Any]]:
        described = self.admin.describe_topics(self.admin.list_topics(internal=internal),
                                               include_authorized_operations=True)
        offsets = self.offsets([(name, p.partition) for name, t in described.items() for p in t.partitions])
        sizes = self.sizes({name: [p.partition for p in t.partitions] for name, t in described.items()})
        out = []
        for name, topic in sorted(described.items()):
            parts = topic.partitions
            out.append({
                "name": name, "internal": topic.is_internal, "partitions": len(parts),
                "replication": max((len(p.replicas) for p in parts), default=0),
                "under_replicated": sum(1 for p in parts if len(p.isr) < len(p.replicas)),
                "offline": sum(1 for p in parts if p.leader < 0),
                "messages": sum(max(0, offsets[(name, p.partition)][1] - offsets[(name, p.partition)][0])
                                for p in parts if (name, p.partition) in offsets),
                "size": self._topic_size(sizes, name, len(parts)),
                "rates": self._rates(name), "operations": topic.authorized_operations,
            })
        return out

    def partition_count(self, name: str) -> int:
        return len(self.admin.describe_topics([name])[name].partitions)

    def topic(self, name: str) -> dict[str, Any]:
        from klog.client.admin import ConfigResource

        described = self.admin.describe_topics([name], include_authorized_operations=True)[name]
        offsets = self.offsets([(name, p.partition) for p in described.partitions])
        sizes = self.sizes({name: [p.partition for p in described.partitions]})
        partitions = []
        for p in sorted(described.partitions, key=lambda p: p.partition):
            start, end = offsets.get((name, p.partition), (-1, -1))
            partitions.append({"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                               "isr": list(p.isr), "start": start, "end": end,
                               "messages": max(0, end - start) if start >= 0 else None,
                               "size": sizes.get((name, p.partition)),
                               "under_replicated": len(p.isr) < len(p.replicas)})
        from klog.client.errors import KafkaError

        configs_refused = None
        try:
            configs = self.admin.describe_configs([ConfigResource("topic", name)])
        except KafkaError as exc:   # DescribeConfigs needs DescribeConfigs on the topic
            if not refused_by_acls(exc):
                raise
            configs, configs_refused = {}, exc.name
        entries = next(iter(configs.values()), {})
        return {"name": name, "internal": described.is_internal, "topic_id": str(described.topic_id),
                "partitions": partitions,
                "configs": [{"name": e.name, "value": "(sensitive)" if e.is_sensitive else e.value,
                             "source": e.source, "is_default": e.is_default}
                            for e in sorted(entries.values(), key=lambda e: e.name)],
                "size": self._topic_size(sizes, name, len(partitions)), "rates": self._rates(name),
                "operations": described.authorized_operations, "configs_refused": configs_refused}

    def sizes(self, topics: dict[str, list[int]]) -> dict[tuple[str, int], float]:
        """Bytes per partition: DescribeLogDirs where the cluster has it (the largest replica), else the metrics
        endpoint's ``kafka_log_log_size``, else nothing."""
        from klog.client.errors import KafkaError, UnsupportedFeatureError

        if self._log_dirs_supported and topics:
            try:
                described = self.admin.describe_log_dirs(topics=topics)
            except UnsupportedFeatureError:
                self._log_dirs_supported = False
            except KafkaError as exc:
                # DescribeLogDirs needs Describe on the cluster: a principal without it sees no sizes, not an error
                if not refused_by_acls(exc):
                    raise
            else:
                sizes: dict[tuple[str, int], float] = {}
                for dirs in described.values():
                    for log_dir in dirs.values():
                        for tp, size in log_dir.sizes.items():
                            key = (tp.topic, tp.partition)
                            sizes[key] = max(sizes.get(key, 0), size)
                return sizes
        return dict(self.metrics.sizes) if self.metrics is not None else {}

    @staticmethod
    def _topic_size(sizes: dict[tuple[str, int], float], name: str, partitions: int) -> float | None:
        found = [sizes[(name, p)] for p in range(partitions) if (name, p) in sizes]
        return sum(found) if found else None

    def _rates(self, topic: str) -> dict[str, list[float]] | None:
        if self.metrics is None:
            return None
        return {kind: self.metrics.rate_values(topic, kind) for kind in RATE_COUNTERS.values()}

    # ---- security: ACLs, SCRAM users, client quotas ---------------------------------------------------------

    def acls(self) -> list[dict[str, Any]]:
        """Every ACL the principal may see (DescribeAcls, which needs Describe on the cluster)."""
        rows = [{"resource_type": a.resource_type, "resource_name": a.resource_name, "pattern_type": a.pattern_type,
                 "principal": a.principal, "host": a.host, "operation": a.operation,
                 "permission": a.permission_type} for a in self.admin.describe_acls()]
        return sorted(rows, key=lambda r: (r["resource_type"], r["resource_name"], r["principal"], r["operation"]))

    def users(self) -> list[dict[str, Any]]:
        """Every user with SCRAM credentials: mechanisms and iterations (DescribeUserScramCredentials)."""
        described = self.admin.describe_user_scram_credentials()
        return [{"user": user, "credentials": sorted(((c.mechanism, c.iterations) for c in infos))}
                for user, infos in sorted(described.items())]

    def quotas(self) -> list[dict[str, Any]]:
        """Every client quota entity with its quotas (DescribeClientQuotas; defaults shown as DEFAULT_ENTITY)."""
        described = self.admin.describe_client_quotas(any_named=(), strict=False)
        rows = []
        for entity, values in described.items():
            rows.append({"entity": [(kind, DEFAULT_ENTITY if name is None else name) for kind, name in entity],
                         "quotas": sorted(values.items())})
        return sorted(rows, key=lambda r: r["entity"])

    # ---- messages ---------------------------------------------------------------------------------------

    def messages(self, topic: str, partition: int, *, offset: int | None = None, timestamp_ms: int | None = None,
                 limit: int = 50, wait_s: float = BROWSE_WAIT_S) -> dict[str, Any]:
        """Up to ``limit`` records of one partition from ``offset`` (or the first at/after ``timestamp_ms``;
        neither: the last ``limit``). Returns the records and where the partition starts and ends."""
        from klog.client import Consumer

        limit = max(1, min(limit, MAX_BROWSE_RECORDS))
        start, end = self.offsets([(topic, partition)]).get((topic, partition), (0, 0))
        if timestamp_ms is not None:
            found = self.offset_for_time(topic, partition, timestamp_ms)
            offset = end if found is None else found
        if offset is None:
            offset = max(start, end - limit)
        offset = min(max(offset, start), end)
        records: list[Any] = []
        if offset < end:
            consumer = Consumer(bootstrap_servers=self.bootstrap_servers, group_id=None,
                                **{**self.client_config, "client.id": "klog-console-browser"})
            try:
                consumer.assign([(topic, partition)])
                consumer.seek((topic, partition), offset)
                deadline = time.monotonic() + wait_s
                while len(records) < limit and time.monotonic() < deadline:
                    batch = consumer.poll(max(0.0, deadline - time.monotonic()), max_records=limit - len(records))
                    records += batch
                    if records and records[-1].offset + 1 >= end:
                        break
            finally:
                consumer.close(autocommit=False)
        next_offset = records[-1].offset + 1 if records else offset
        return {"topic": topic, "partition": partition, "offset": offset, "start": start, "end": end,
                "next": next_offset, "records": records[:limit]}

    # ---- groups -----------------------------------------------------------------------------------------

    def _list_groups(self) -> list[Any]:
        listings = self.admin.list_groups()
        self._share_groups = {g.group_id for g in listings if (g.type or "") == "share"}
        return listings

    def groups(self) -> list[dict[str, Any]]:
        out = []
        for listing in sorted(self._list_groups(), key=lambda g: g.group_id):
            lag = self.group_lag(listing.group_id)
            out.append({"group_id": listing.group_id, "state": listing.state or "-",
                        "type": listing.type or listing.protocol_type or "-",
                        "protocol_type": listing.protocol_type,
                        "partitions": len(lag), "lag": sum(row["lag"] for row in lag if row["lag"] is not None),
                        "history": self.history.values(("group-lag", listing.group_id))})
        return out

    def existing(self, partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """The ``partitions`` whose topic exists. A group's commits can outlive their topic (a broker that does
        not drop them when the topic is deleted), and ListOffsets of a deleted topic waits for its timeout."""
        if not partitions:
            return []
        topics = set(self.admin.list_topics(internal=True))
        return [tp for tp in partitions if tp[0] in topics]

    def group_lag(self, group_id: str) -> list[dict[str, Any]]:
        if group_id in self._share_groups:
            return self.share_partitions(group_id)
        committed = self.admin.list_group_offsets(group_id)
        partitions = sorted((tp.topic, tp.partition) for tp in committed)
        offsets = self.offsets(self.existing(partitions))
        rows = []
        for tp, om in sorted(committed.items()):
            end = offsets.get((tp.topic, tp.partition), (-1, -1))[1]
            rows.append({"topic": tp.topic, "partition": tp.partition, "committed": om.offset, "end": end,
                         "lag": max(0, end - om.offset) if end >= 0 and om.offset >= 0 else None,
                         "metadata": om.metadata})
        return rows

    def share_partitions(self, group_id: str) -> list[dict[str, Any]]:
        """A share group's share-partitions: start offset and lag (DescribeShareGroupOffsets), and their in-flight
        records by state when the brokers' metrics are read (klog brokers: ``klog_share_partition_records``)."""
        from klog.client.errors import KafkaError

        try:
            offsets = self.admin.list_share_group_offsets(group_id)
        except KafkaError as exc:
            log.info("share group %s: no offsets: %s", group_id, exc)
            return []
        in_flight = self.metrics.share_records if self.metrics is not None else None
        rows = []
        for tp, (start, lag) in sorted(offsets.items()):
            counts = None if in_flight is None else in_flight.get((group_id, tp.topic, tp.partition), {})
            rows.append({"topic": tp.topic, "partition": tp.partition, "committed": start, "start": start, "end": -1,
                         "lag": lag if lag >= 0 else None, "metadata": "",
                         **{state: None if counts is None else counts.get(state, 0)
                            for state in ("acquired", "available", "acknowledged", "archived")}})
        return rows

    def describe_group(self, group_id: str) -> Any:
        """The group's description (klog.client.admin.GroupDescription): classic, KIP-848, streams or share; or
        None. With what the principal may do on it (its ``authorized_operations``; None for a streams group)."""
        from klog.client.errors import GroupIdNotFoundError, UnsupportedFeatureError

        try:
            return self.admin.describe_groups([group_id], include_authorized_operations=True).get(group_id)
        except GroupIdNotFoundError:   # Kafka 4 (KIP-1043): not a classic group; perhaps a consumer-protocol one
            pass
        try:
            return self.admin.describe_consumer_groups([group_id], include_authorized_operations=True).get(group_id)
        except (GroupIdNotFoundError, UnsupportedFeatureError):
            pass
        try:   # a streams group (KIP-1071)
            return self.admin.describe_streams_groups([group_id]).get(group_id)
        except (GroupIdNotFoundError, UnsupportedFeatureError):
            pass
        try:   # a share group (KIP-932)
            return self.admin.describe_share_groups([group_id], include_authorized_operations=True).get(group_id)
        except (GroupIdNotFoundError, UnsupportedFeatureError):
            return None

    def group(self, group_id: str) -> dict[str, Any]:
        described = self.describe_group(group_id)
        share = described is not None and described.protocol_type == "share"
        if share:
            self._share_groups.add(group_id)
        lag = self.group_lag(group_id)
        owners: dict[tuple[str, int], str] = {}
        members = []
        if described is not None:
            for member in described.members:
                assigned = sorted((tp.topic, tp.partition) for tp in member.assignment)
                for tp in assigned:
                    owners[tp] = member.client_id or member.member_id
                members.append({"member_id": member.member_id, "client_id": member.client_id,
                                "host": member.client_host, "instance_id": member.group_instance_id,
                                "assignment": [f"{t}-{p}" for t, p in assigned]})
        for row in lag:
            row["owner"] = owners.get((row["topic"], row["partition"]), "")
        series = {f"{row['topic']}-{row['partition']}": self.history.series(
            ("partition-lag", group_id, row["topic"], row["partition"])) for row in lag}
        return {"group_id": group_id, "state": described.state if described else "Unknown", "share": share,
                "in_flight_known": self.metrics is not None,
                "protocol_type": described.protocol_type if described else "",
                "protocol": described.protocol if described else "", "members": members, "lag": lag,
                "operations": described.authorized_operations if described else None,
                "total_lag": sum(row["lag"] for row in lag if row["lag"] is not None), "lag_series": series}

    # ---- sampling -------------------------------------------------------------------------------------

    def sample(self, now: float | None = None) -> None:
        """One round of the history: every group's lag per partition, and the metrics endpoint's counters."""
        now = time.time() if now is None else now
        if self.metrics is not None:
            self.metrics.scrape(now)
        for listing in self._list_groups():
            rows = self.group_lag(listing.group_id)
            total = 0
            for row in rows:
                if row["lag"] is not None:
                    total += row["lag"]
                    self.history.add(("partition-lag", listing.group_id, row["topic"], row["partition"]), now,
                                     row["lag"])
            self.history.add(("group-lag", listing.group_id), now, total)
