"""Broker and topic configuration: Kafka's property names, typed and validated.

A small schema (name, type, default, validator, doc) for every key klog understands. Values come from a
Java ``.properties`` file (parsed by the ``javaproperties`` library) plus ``--override key=value`` pairs.
Unknown keys and invalid values raise :class:`ConfigError` naming the key, so startup stops with a clear
message. Keys that only make sense for Apache Kafka's own deployment (thread pools, KRaft controller
settings) are accepted for drop-in compatibility with Kafka's ``server.properties`` and have no effect.

It lives below both the controller (which validates topic configs and applies broker defaults when it decides)
and the broker (which reads its ``server.properties`` with it), so neither imports the other for it;
``klog.broker.config`` re-exports it for the broker's modules.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

# re-exported: klog.metadata.config is the one module the configs are imported from
from klog.metadata.config_compat import KAFKA_COMPAT_KEYS
from klog.metadata.config_providers import is_provider_key
from klog.metadata.config_providers import resolve as resolve_providers
from klog.metadata.config_keys import (
    _KAFKA_ONLY as _KAFKA_ONLY,
    CONFIG_TYPE_CODES as CONFIG_TYPE_CODES,
    INT_MAX as INT_MAX,
    LISTEN_BACKLOG_DEFAULT as LISTEN_BACKLOG_DEFAULT,
    LONG_MAX as LONG_MAX,
    PARSERS as PARSERS,
    QUEUED_MAX_REQUEST_BYTES_DEFAULT as QUEUED_MAX_REQUEST_BYTES_DEFAULT,
    RACK_AWARE_REPLICA_SELECTOR as RACK_AWARE_REPLICA_SELECTOR,
    REPLICA_SELECTORS as REPLICA_SELECTORS,
    ConfigError as ConfigError,
    ConfigKey as ConfigKey,
    _k as _k,
    _metrics_listener as _metrics_listener,
    _parse_bool as _parse_bool,
    _parse_double as _parse_double,
    _parse_int as _parse_int,
    _parse_list as _parse_list,
    at_least as at_least,
    in_range as in_range,
    one_of as one_of,
    parse_listener as parse_listener,
)
from klog.metadata.config_security import (
    _LISTENER_KEY_RE as _LISTENER_KEY_RE,
    _LISTENER_OWN_KEYS as _LISTENER_OWN_KEYS,
    _LISTENER_RE as _LISTENER_RE,
    _MECHANISM_KEYS as _MECHANISM_KEYS,
    _NO_KERBEROS as _NO_KERBEROS,
    _SECURITY_PROTOCOLS as _SECURITY_PROTOCOLS,
    BROKER_SECURITY_KEYS as BROKER_SECURITY_KEYS,
    SASL_MECHANISMS as SASL_MECHANISMS,
    SECURITY_KEYS as SECURITY_KEYS,
    SSL_CLIENT_AUTH as SSL_CLIENT_AUTH,
    TLS_PROTOCOLS as TLS_PROTOCOLS,
    Listener as Listener,
    _keystore_type as _keystore_type,
    _mechanisms as _mechanisms,
    _tls_protocols as _tls_protocols,
    parse_listeners as parse_listeners,
)

if TYPE_CHECKING:
    from klog.protocol.message_types import DescribeConfigsResponseResourceResult, DescribeConfigsResponseSynonym

# ---- topic-level configs (CreateTopics/AlterConfigs/DescribeConfigs on a topic) --------------------------

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: compression.type -> the codec id batches are stored with (Kafka's CompressionType id); producer: as sent
COMPRESSION_CODEC_IDS: dict[str, int | None] = {"producer": None, "uncompressed": 0, "gzip": 1, "snappy": 2,
                                                "lz4": 3, "zstd": 4}


def _gzip_level(v: int) -> str | None:
    """Kafka's GzipCompression.LevelValidator: -1 (zlib's default) or 1..9."""
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9 or equal to -1"

def _throttled_replicas(name: str) -> Callable[[list[str]], str | None]:
    """Kafka's ``ThrottledReplicaListValidator`` of topic config ``name``: ``*`` alone, or ``partition:broker``
    pairs, with its words."""
    def check(entries: list[str]) -> str | None:
        if entries == ["*"]:
            return None
        for entry in entries:
            partition, sep, broker = entry.partition(":")
            if not (sep and partition.isdigit() and broker.isdigit()):
                return (f"{name} must be the literal '*' or a list of replicas in the following format: "
                        "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
        return None
    return check


TOPIC_KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    _k("cleanup.policy", "list", ["delete"], "delete (retention.ms and retention.bytes remove old segments) "
       "and/or compact (the log cleaner keeps the latest record of each key)",
       one_of("compact", "delete")),
    _k("compression.type", "string", "producer", "final compression type of the topic's data: producer keeps "
       "batches as sent; uncompressed, gzip, snappy, lz4 or zstd recompresses batches of another codec on the "
       "leader (in the native core, as Kafka's LogValidator)", one_of(*COMPRESSION_TYPES)),
    _k("compression.gzip.level", "int", -1, "gzip level of batches recompressed to gzip (-1: zlib's default, 6)",
       _gzip_level),
    _k("compression.lz4.level", "int", 9, "accepted for Kafka compatibility; klog's lz4 encoder has one level "
       "(LZ4 frames, 64 KiB independent blocks)", in_range(1, 17)),
    _k("compression.zstd.level", "int", 3, "zstd level of batches recompressed to zstd",
       in_range(-131072, 22)),
    _k("delete.retention.ms", "long", 86400000, "how long a tombstone (null value) of a compacted topic is kept after "
       "the cleaning pass that first kept it",
       at_least(0)),
    _k("file.delete.delay.ms", "long", 60000, "delay before a deleted segment's files are removed",
       at_least(0)),
    _k("flush.messages", "long", LONG_MAX, "fsync after this many messages", at_least(1)),
    _k("flush.ms", "long", LONG_MAX, "fsync after this many milliseconds", at_least(0)),
    _k("index.interval.bytes", "int", 4096, "bytes between offset index entries", at_least(0)),
    _k("max.message.bytes", "int", 1048588, "largest record batch size allowed", at_least(0)),
    _k("message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime",
       one_of(*TIMESTAMP_TYPES)),
    _k("message.timestamp.before.max.ms", "long", LONG_MAX,
       "largest allowed age of a CreateTime timestamp", at_least(0)),
    _k("message.timestamp.after.max.ms", "long", 3600000,
       "largest allowed distance of a CreateTime timestamp into the future", at_least(0)),
    _k("min.insync.replicas", "int", 1, "replicas that must acknowledge an acks=all produce", at_least(1)),
    _k("retention.bytes", "long", -1, "size limit of the partition log (-1: none)"),
    _k("retention.ms", "long", 604800000, "age limit of log segments (-1: none)", at_least(-1)),
    _k("segment.bytes", "int", 1073741824, "size of a log segment file", at_least(14)),
    _k("segment.index.bytes", "int", 10485760, "size of a segment's offset index", at_least(4)),
    _k("segment.jitter.ms", "long", 0, "random jitter subtracted from segment.ms", at_least(0)),
    _k("segment.ms", "long", 604800000, "roll a segment after this age", at_least(1)),
    _k("preallocate", "boolean", False, "preallocate segment files"),
    _k("unclean.leader.election.enable", "boolean", False, "a partition whose ISR has no live member may be led by "
       "an out-of-sync replica (losing what only the ISR had); off, it stays offline until an ISR member returns"),
    _k("min.cleanable.dirty.ratio", "double", 0.5, "the cleaner takes a compacted log once its uncleaned bytes are "
       "this share of its cleanable bytes (the dirtiest log first)", in_range(0, 1)),
    _k("min.compaction.lag.ms", "long", 0, "records younger than this are not compacted", at_least(0)),
    _k("max.compaction.lag.ms", "long", LONG_MAX, "records older than this are compacted whatever the dirty ratio "
       "(the active segment rolls after it)", at_least(1)),
    _k("leader.replication.throttled.replicas", "list", [], "replicas (partition:broker pairs, or *) whose "
       "leader serves followers within its leader.replication.throttled.rate (kafka-reassign-partitions "
       "--throttle sets it)", _throttled_replicas("leader.replication.throttled.replicas")),
    _k("follower.replication.throttled.replicas", "list", [], "replicas (partition:broker pairs, or *) that "
       "fetch from their leader within their broker's follower.replication.throttled.rate",
       _throttled_replicas("follower.replication.throttled.replicas")),
    _k("local.retention.ms", "long", -2, "tiered storage: no effect", at_least(-2), no_effect=True),
    _k("local.retention.bytes", "long", -2, "tiered storage: no effect", at_least(-2), no_effect=True),
    _k("remote.storage.enable", "boolean", False, "tiered storage: no effect", no_effect=True),
    _k("remote.log.copy.disable", "boolean", False, "tiered storage: no effect", no_effect=True),
    _k("remote.log.delete.on.disable", "boolean", False, "tiered storage: no effect", no_effect=True),
]}

#: topic config -> the broker key that supplies its default (Kafka's synonyms).
TOPIC_TO_BROKER_KEY = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "preallocate": "log.preallocate",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}


# ---- broker configs ------------------------------------------------------------------------------------

def _topic_default(topic_key: str, broker_key: str, type_: str | None = None, validator: Any = None,
                   default: Any = ..., **kw: Any) -> ConfigKey:
    base = TOPIC_KEYS[topic_key]
    return ConfigKey(broker_key, type_ or base.type, base.default if default is ... else default,
                     f"default for topic config {topic_key}",
                     validator or base.validator, **kw)



#: The broker-wide defaults of topic configs (log.retention.ms, compression.type, ...): dynamic as in Kafka's
#: DynamicLogConfig, so ``kafka-configs --entity-type brokers --entity-default --alter`` changes every topic without
#: an override of its own, at once.
DYNAMIC_LOG_KEYS = frozenset(TOPIC_TO_BROKER_KEY.values())
#: KIP-1066: log dirs in which this broker makes no new partition log, ``*`` for all of them (metadata.version
#: 4.3-IV0+: the controller places no new replica on a broker whose log dirs are all cordoned)
CORDONED_LOG_DIRS = "cordoned.log.dirs"
CORDONED_ALL = "*"


def cordoned_log_dirs_problem(cordoned: list[str], log_dirs: list[str]) -> str | None:
    """Why a ``cordoned.log.dirs`` value is refused (Kafka's ``KafkaConfig.validateCordonedLogDirs``: ``*`` alone, or
    entries of ``log.dirs``/``log.dir`` as written there); None: it is valid."""
    if CORDONED_ALL in cordoned:
        return None if len(cordoned) == 1 else \
            f"When {CORDONED_LOG_DIRS} is set to {CORDONED_ALL}, it must not contain other values"
    missing = [d for d in cordoned if d not in log_dirs]
    if missing:
        return (f"All entries in {CORDONED_LOG_DIRS} must be present in log.dirs or log.dir. Missing entries : "
                f"{','.join(missing)}")
    return None


def cordoned_paths(cordoned: list[str], log_dirs: list[str]) -> frozenset[str]:
    """The absolute paths of the cordoned log dirs among ``log_dirs`` (``*``: all of them)."""
    chosen = log_dirs if CORDONED_ALL in cordoned else [d for d in log_dirs if d in cordoned]
    return frozenset(os.path.abspath(d) for d in chosen)


#: The broker's own SASL login settings (Kerberos', and the token refresh of an OAUTHBEARER login): per-broker dynamic
#: configs in Kafka (its DynamicListenerConfig). klog makes no such login: it takes them without effect, in
#: server.properties and at runtime alike (librdkafka's admin test sets sasl.kerberos.min.time.before.relogin).
DYNAMIC_SASL_LOGIN_KEYS = frozenset({
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds"})
#: Broker configs IncrementalAlterConfigs/AlterConfigs may change at runtime (ConfigRecords on the broker's resource,
#: or "" for every broker); every other broker config is static (server.properties / --override).
DYNAMIC_BROKER_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                 "replica.alter.log.dirs.io.max.bytes.per.second", "max.connections",
                                 "max.connections.per.ip", "max.connections.per.ip.overrides",
                                 "max.connection.creation.rate", CORDONED_LOG_DIRS}) | DYNAMIC_LOG_KEYS \
    | DYNAMIC_SASL_LOGIN_KEYS
#: dynamic broker configs a broker id must be named for (Kafka's DynamicBrokerConfig.PER_BROKER_CONFIGS, the TLS
#: listener settings aside): no cluster-wide default
PER_BROKER_KEYS = frozenset({CORDONED_LOG_DIRS}) | DYNAMIC_SASL_LOGIN_KEYS

BROKER_KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    # identity and listeners
    _k("node.id", "int", 1, "this broker's id", at_least(0)),
    _k("broker.id", "int", -1, "older name of node.id (-1: unset)", at_least(-1)),
    _k("cluster.id", "string", None, "cluster id (generated and stored in meta.properties when absent)",
       internal=True),
    _k("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "listener URIs the broker binds"),
    _k("advertised.listeners", "list", None, "listener URIs given to clients (default: listeners)"),
    # a STRING in Kafka's ConfigDef (NAME:PROTOCOL,...), split where it is read
    _k("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
       "listener name -> security protocol"),
    _k("inter.broker.listener.name", "string", None, "the listener brokers connect to each other on (replica "
       "fetchers, transaction markers, share-group state); default: the listener named by "
       "security.inter.broker.protocol"),
    _k("controller.listener.names", "list", None, "listeners reserved for Kafka's controller (not served)"),
    _k("process.roles", "list", ["broker", "controller"],
       "broker, controller or both; with controller.quorum.voters set, a controller role joins that Raft quorum "
       "(without it, klog is one node that is its own quorum)", one_of("broker", "controller")),
    _k("controller.quorum.voters", "list", [], "the static controller quorum, id@host:port,... (KRaft)"),
    _k("controller.quorum.bootstrap.servers", "list", [], "KIP-853: controller listeners host:port,... a node "
       "finds the quorum through (instead of controller.quorum.voters): a controller reads the voters "
       "klog-broker format --standalone / --initial-controllers wrote (one formatted --no-initial-controllers asks "
       "them and joins through kafka-metadata-quorum add-controller, or by itself with "
       "controller.quorum.auto.join.enable), a broker-only node asks the controllers"),
    _k("controller.quorum.auto.join.enable", "boolean", False, "KIP-853 auto-join: a controller whose voter key "
       "(node id, directory id) is not a voter asks the leader itself with AddRaftVoter, once per "
       "controller.quorum.fetch.timeout.ms until added (first RemoveRaftVoter for a voter holding its node id under "
       "another directory id: a replaced, reformatted disk); false: it joins through kafka-metadata-quorum "
       "add-controller"),
    _k("controller.quorum.election.timeout.ms", "int", 1000, "Raft election timeout (a leader that has not heard "
       "from a majority for this long steps down)", at_least(1)),
    _k("controller.quorum.fetch.timeout.ms", "int", 2000, "a follower that has not heard from the leader for this "
       "long stands for election", at_least(1)),
    _k("controller.quorum.election.backoff.max.ms", "int", 1000, "random spread before (re)standing for election",
       at_least(1)),
    _k("controller.quorum.retry.backoff.ms", "int", 20, "first wait before reconnecting to a quorum peer "
       "(doubling up to 1 s)", at_least(1)),
    _k("controller.quorum.request.timeout.ms", "int", 2000, _KAFKA_ONLY + " (raft-rs retransmits on its heartbeat "
       "instead)", no_effect=True),
    _k("controller.quorum.append.linger.ms", "int", 25, _KAFKA_ONLY + " (each proposal is its own Raft entry)",
       no_effect=True),
    _k("metadata.log.dir", "string", None, "directory holding __cluster_metadata-0 (default: the first log dir)"),
    _k("metadata.log.segment.bytes", "int", 1024 * 1024 * 1024, "bytes of one metadata log segment",
       at_least(14)),
    _k("metadata.log.segment.ms", "long", 7 * 24 * 3600 * 1000, "age at which a metadata log segment is rolled",
       at_least(1)),
    _k("metadata.max.retention.bytes", "long", 100 * 1024 * 1024, _KAFKA_ONLY + " (a member keeps its latest "
       "snapshot and the log after it)", no_effect=True),
    _k("metadata.max.retention.ms", "long", 7 * 24 * 3600 * 1000, _KAFKA_ONLY + " (a member keeps its latest "
       "snapshot and the log after it)", no_effect=True),
    _k("broker.heartbeat.interval.ms", "int", 2000, "a broker of a controller quorum heartbeats to the active "
       "controller this often (BrokerHeartbeat)", at_least(1)),
    _k("broker.session.timeout.ms", "int", 9000, "the active controller fences a broker it has not heard from for "
       "this long; a SIGTERM's controlled shutdown waits at most this long for the controller", at_least(1)),
    _k("auto.leader.rebalance.enable", "boolean", True, "the active controller moves each partition's leadership "
       "back to its preferred replica (the first assigned one) when that replica is in the ISR and its broker is "
       "unfenced, checked every leader.imbalance.check.interval.seconds"),
    _k("leader.imbalance.check.interval.seconds", "long", 300, "how often the active controller looks for partitions "
       "not led by their preferred replica (auto.leader.rebalance.enable)", at_least(1)),
    _k("metadata.max.idle.interval.ms", "int", 500, "the active controller appends a NoOpRecord this often "
       "(0: never), so brokers can tell a live but idle metadata log from a stale one (KIP-835)", at_least(0)),
    _k("metadata.log.max.snapshot.interval.ms", "long", 3_600_000, "a controller snapshots its metadata image at "
       "least this often when new records were committed (0: no time-based snapshots)", at_least(0)),
    _k("metadata.log.max.record.bytes.between.snapshots", "long", 20 * 1024 * 1024, "a controller snapshots its "
       "metadata image after this many bytes of committed records", at_least(1)),
    _k("klog.controller.max.records.per.batch", "int", 10_000, "records of one metadata log batch (Kafka's "
       "QuorumController bound, 10,000, not configurable there); a controller operation with more records (e.g. "
       "CreateTopics with many partitions) is committed as a KIP-868 metadata transaction over several batches, "
       "which brokers apply all at once or, when the controller failed in between, not at all", at_least(3)),
    _k("broker.rack", "string", None, "rack reported in Metadata"),
    # authorization (klog.security.authorizer)
    _k("authorizer.class.name", "string", "", "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs "
       "on (every request is checked against the ACLs of the metadata log); empty: no authorizer, everything is "
       "allowed", one_of("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer")),
    _k("super.users", "string", "", "principals allowed everything, separated by semicolons "
       "(User:admin;User:broker); the nodes' principals on the controller listener belong here (User:ANONYMOUS on "
       "a PLAINTEXT controller listener, as on Kafka; see security.md)", internal=True),
    _k("allow.everyone.if.no.acl.found", "boolean", False, "a resource without any ACL is open to every principal "
       "(with an authorizer)", internal=True),
    # data
    _k("log.dirs", "list", None, "directories holding the partition logs"),
    _k("log.dir", "list", ["./klog-data"], "the log directories when log.dirs is not set"),
    _k(CORDONED_LOG_DIRS, "list", [], "log dirs (entries of log.dirs or log.dir, or * for all) in which no new "
       "partition log is made; a broker whose log dirs are all cordoned gets no new replicas (KIP-1066, "
       "metadata.version 4.3-IV0+); dynamic per broker"),
    _k("num.partitions", "int", 1, "partitions of auto-created topics", at_least(1)),
    _k("default.replication.factor", "int", 1, "replication factor of auto-created topics", at_least(1)),
    _k("auto.create.topics.enable", "boolean", True, "create unknown topics on Metadata/Produce"),
    _k("delete.topic.enable", "boolean", True, "allow DeleteTopics"),
    _k("log.retention.ms", "long", None, "retention age (overrides minutes/hours)", at_least(-1)),
    _k("log.retention.minutes", "int", None, "retention age in minutes (overrides hours)", at_least(-1)),
    _k("log.retention.hours", "int", 168, "retention age in hours", at_least(-1)),
    _k("log.retention.check.interval.ms", "long", 300000, "how often retention runs", at_least(1)),
    _k("log.roll.ms", "long", None, "roll segments after this age (overrides hours)", at_least(1)),
    _k("log.roll.hours", "int", 168, "roll segments after this many hours", at_least(1)),
    _topic_default("retention.bytes", "log.retention.bytes"),
    _topic_default("segment.bytes", "log.segment.bytes"),
    _topic_default("cleanup.policy", "log.cleanup.policy"),
    _topic_default("compression.type", "compression.type"),
    _topic_default("compression.gzip.level", "compression.gzip.level"),
    _topic_default("compression.lz4.level", "compression.lz4.level"),
    _topic_default("compression.zstd.level", "compression.zstd.level"),
    _topic_default("delete.retention.ms", "log.cleaner.delete.retention.ms"),
    _topic_default("file.delete.delay.ms", "log.segment.delete.delay.ms"),
    _topic_default("flush.messages", "log.flush.interval.messages"),
    _k("log.flush.interval.ms", "long", None, "fsync after this many ms (default: flush.scheduler)",
       at_least(0)),
    _k("log.flush.scheduler.interval.ms", "long", LONG_MAX, "klog checks flush.ms/flush.messages every second",
       at_least(0), no_effect=True),
    _k("log.flush.offset.checkpoint.interval.ms", "int", 60000, "recovery point checkpoint interval",
       at_least(0)),
    _k("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
       "klog checkpoints log start offsets with the recovery points (log.flush.offset.checkpoint.interval.ms)",
       at_least(0), no_effect=True),
    _topic_default("index.interval.bytes", "log.index.interval.bytes"),
    _topic_default("segment.index.bytes", "log.index.size.max.bytes"),
    _topic_default("message.timestamp.type", "log.message.timestamp.type"),
    _topic_default("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms"),
    _topic_default("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"),
    # no default: log.roll.jitter.hours supplies it, as in Kafka
    _topic_default("segment.jitter.ms", "log.roll.jitter.ms", default=None),
    _k("log.roll.jitter.hours", "int", 0, "default of the topic config segment.jitter.ms in hours, when "
       "log.roll.jitter.ms is not set", at_least(0)),
    _topic_default("preallocate", "log.preallocate"),
    _topic_default("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
    _topic_default("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
    _topic_default("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
    _topic_default("min.insync.replicas", "min.insync.replicas"),
    _topic_default("unclean.leader.election.enable", "unclean.leader.election.enable"),
    _k("log.cleaner.enable", "boolean", True, "run the log cleaner, which compacts topics whose cleanup.policy "
       "holds compact"),
    _k("log.cleaner.threads", "int", 1, "log cleaner threads (native, outside the GIL)", at_least(1)),
    _k("log.cleaner.dedupe.buffer.size", "long", 134217728, "memory of the cleaner's key maps, all threads together "
       "(24 bytes per key)", at_least(1024)),
    _k("log.cleaner.io.buffer.load.factor", "double", 0.9, "how full a cleaner key map may get", in_range(0.01, 1)),
    _k("log.cleaner.io.buffer.size", "int", 524288, "cleaner read and write buffers, all threads together",
       at_least(512)),
    _k("log.cleaner.backoff.ms", "long", 15000, "how long the cleaner sleeps when no log needs cleaning",
       at_least(0)),
    _k("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, "bytes per second the cleaner "
       "threads read and write together", at_least(1)),
    _k("message.max.bytes", "int", 1048588, "largest record batch the broker accepts", at_least(0)),
    # replication (klog.broker.replication): the follower's fetchers and the leader's ISR bookkeeping
    _k("replica.fetch.max.bytes", "int", 1048576, "bytes a replica fetch asks for per partition (at least one "
       "batch is returned)", at_least(0)),
    _k("replica.fetch.response.max.bytes", "int", 10485760, "bytes a replica fetch response may hold in all",
       at_least(0)),
    _k("replica.fetch.wait.max.ms", "int", 500, "how long a leader holds a replica fetch waiting for data",
       at_least(0)),
    _k("replica.fetch.min.bytes", "int", 1, "bytes a replica fetch waits for before it is answered", at_least(1)),
    _k("replica.fetch.backoff.ms", "int", 1000, "pause of a replica fetcher after a fetch failed", at_least(0)),
    _k("leader.replication.throttled.rate", "long", LONG_MAX, "bytes/s a leader sends to the followers of the "
       "replicas topics list in leader.replication.throttled.replicas; dynamic (IncrementalAlterConfigs on this "
       "broker or the cluster default)", at_least(0), internal=True),
    _k("follower.replication.throttled.rate", "long", LONG_MAX, "bytes/s this broker's replica fetchers take for "
       "the replicas topics list in follower.replication.throttled.replicas; dynamic as the leader's", at_least(0),
       internal=True),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX, "bytes/s a move of replicas between "
       "this broker's log dirs (AlterReplicaLogDirs) copies; dynamic as the replication throttles "
       "(kafka-reassign-partitions --replica-alter-log-dirs-throttle)", at_least(0), internal=True),
    _k("klog.replica.append.inline.bytes", "int", 65536, "record bytes of one partition in a replica fetch's "
       "answer that the follower appends on the event loop, as a leader appends produced batches; larger ones are "
       "appended on a worker thread with the GIL released, the partitions of one answer side by side",
       at_least(0)),
    _k("num.replica.fetchers", "int", 1, "replica fetchers (asyncio tasks, one connection each) per source broker",
       at_least(1)),
    _k("replica.lag.time.max.ms", "long", 30000, "a follower not caught up for this long leaves the ISR",
       at_least(1)),
    _k("replica.selector.class", "string", None, "KIP-392: a leader with "
       "org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer whose client.rack holds an in-sync "
       "follower (and not the leader) to read from that follower (preferred_read_replica); unset: consumers read "
       "from the leader", one_of(*REPLICA_SELECTORS)),
    _k("num.recovery.threads.per.data.dir", "int", 2, "threads per log dir that flush and close the logs at "
       "shutdown", at_least(1)),
    _k("log.initial.task.delay.ms", "long", 30000, "delay before the first retention pass", at_least(0),
       internal=True),
    # network limits
    _k("socket.request.max.bytes", "int", 104857600, "largest request frame accepted", at_least(1)),
    _k("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF of client sockets (-1: OS default)"),
    _k("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF of client sockets (-1: OS default)"),
    # Kafka's default is 50, but Kafka drains its queue from a dedicated acceptor thread. klog accepts on its
    # event loop between requests: a burst of connects (hundreds of clients starting at once) would overflow 50,
    # and each dropped handshake costs its client a 1 s+ SYN-ACK retransmit (or a reset after ~1 min).
    _k("socket.listen.backlog.size", "int", LISTEN_BACKLOG_DEFAULT, "listen() backlog (Kafka's default is 50; "
       "klog's is larger because its event loop, not a dedicated thread, accepts; Linux caps it at "
       "net.core.somaxconn)", at_least(1)),
    _k("max.connections", "int", 10000, "open client connections allowed at once; dynamic (IncrementalAlterConfigs on this broker or the cluster default)", at_least(0)),
    _k("max.connections.per.ip", "int", INT_MAX, "open connections allowed from one address; dynamic (IncrementalAlterConfigs on this broker or the cluster default)", at_least(0)),
    _k("max.connections.per.ip.overrides", "string", "", "host:count,... : open connections allowed from those "
       "addresses (host names resolved when set) instead of max.connections.per.ip; dynamic (IncrementalAlterConfigs on this broker or the cluster default)"),
    _k("max.connection.creation.rate", "int", INT_MAX, "new connections per second a broker accepts on its "
       "listeners but the inter-broker one (listener.name.<l>.max.connection.creation.rate: one listener's); "
       "faster ones wait, as Kafka's acceptor; the broker-wide one dynamic (IncrementalAlterConfigs on this broker or the cluster default)", at_least(0)),
    _k("connections.max.idle.ms", "long", 600000, "close connections idle this long", at_least(-1)),
    _k("quota.window.num", "int", 11, "samples a client quota's rate is measured over (Kafka's "
       "ClientQuotaManager)", at_least(1)),
    _k("quota.window.size.seconds", "int", 1, "the time span of each sample of a client quota's rate",
       at_least(1)),
    _k("controller.quota.window.num", "int", 11, "the controller_mutation_rate quota's token bucket holds "
       "controller.quota.window.num windows' worth of the rate (Kafka's ControllerMutationQuotaManager)",
       at_least(1)),
    _k("controller.quota.window.size.seconds", "int", 1, "the window of controller.quota.window.num", at_least(1)),
    _k("queued.max.requests", "int", 500, "Kafka's shared request queue; klog bounds each connection instead "
       "(klog.connection.max.inflight.requests, klog.connection.max.buffered.bytes)", at_least(1), no_effect=True),
    # Kafka's default is -1 (unbounded): 20 clients each trickling a 40 MiB request then hold 800 MiB.
    _k("queued.max.request.bytes", "long", QUEUED_MAX_REQUEST_BYTES_DEFAULT,
       "bytes of requests held across all connections (being received, queued or processed) before connections "
       "with a large request (over 64 KiB) stop being read until bytes are released; -1: unbounded. While no "
       "large request is held, one is admitted whatever its size",
       lambda v: None if v == -1 or v >= 1 else f"must be -1 (unbounded) or positive, got {v}"),
    _k("num.network.threads", "int", 3, _KAFKA_ONLY, no_effect=True),
    _k("num.io.threads", "int", 8, _KAFKA_ONLY, no_effect=True),
    _k("background.threads", "int", 10, _KAFKA_ONLY, no_effect=True),
    _k("request.timeout.ms", "int", 30000, "the replica fetchers' and inter-broker requests' timeout",
       at_least(1)),
    _k("fetch.max.bytes", "int", 57671680, "cap on a fetch response's size", at_least(0)),
    _k("max.incremental.fetch.session.cache.slots", "int", 1000, "KIP-227 fetch sessions kept (0: none, every "
       "fetch is answered as a full one); a replica's session may take a client's slot", at_least(0)),
    _k("klog.fetch.session.max.partitions", "int", 100_000, "partitions one KIP-227 fetch session may hold; a "
       "full fetch naming more is answered without a session, an incremental one growing a session past it ends "
       "the session (the client starts again in full)", at_least(0)),
    _k("klog.fetch.session.cache.max.partitions", "int", 1_000_000, "partitions all KIP-227 fetch sessions may "
       "hold together (about 270 bytes each); a new session that would pass it evicts as a full cache does, else "
       "is answered without one, and an incremental fetch passing it ends its session", at_least(0)),
    # klog's own limits (no Kafka equivalent: Kafka mutes a connection while a request is processed)
    _k("klog.connection.max.inflight.requests", "int", 32,
       "requests read ahead from one connection before it stops being read", at_least(1)),
    _k("klog.connection.max.buffered.bytes", "int", 64 * 1024 * 1024,
       "request + response bytes buffered for one connection before it stops being read", at_least(1024)),
    _k("klog.produce.pipeline.depth", "int", 32,
       "produce requests of one connection appended while their answers wait (acks=all, for the ISR); answers "
       "keep request order and other requests wait for them. 1 answers each before reading the next, as Kafka "
       "does; the default matches klog.connection.max.inflight.requests, so waiting answers alone never stop a "
       "connection being read (librdkafka sends up to 1,000,000 requests at once without idempotence)",
       at_least(1)),
    _k("klog.connection.write.timeout.ms", "long", 60000,
       "close a connection whose client reads nothing for this long while a response waits", at_least(1)),
    _k("klog.message.max.decompressed.bytes", "long", 256 * 1024 * 1024,
       "largest decompressed size of one produced batch's records; a batch inflating past it is refused with "
       "CORRUPT_MESSAGE (decompression stops at the limit)", at_least(1024)),
    _k("klog.produce.validation.inline.bytes", "int", 1024 * 1024,
       "record bytes (decompressed) of a produced batch validated on the event loop; larger batches are "
       "validated on a worker thread with the GIL released while other connections are served", at_least(0)),
    _k("klog.produce.validation.threads", "int", 2,
       "worker threads validating the batches over klog.produce.validation.inline.bytes; the batches of other "
       "requests wait for a free one. Each holds at most one record (up to klog.message.max.decompressed.bytes "
       "for a single huge record) plus 64 KiB", at_least(1)),
    _k("klog.produce.native.enable", "boolean", True,
       "serve common Produce requests (partitions this broker leads, acks=0/1/all, acks=all on a replicated "
       "partition once its ISR satisfies min.insync.replicas, the answer waiting on the high watermark; plain "
       "batches and idempotent producers' batches in sequence, not transactional ones; no client quota) in one "
       "native call: decode, checks, appends and the encoded answer; every other request, and every refused "
       "batch, takes the Python path. false: every Produce takes the Python path"),
    _k("klog.network.native.front.enable", "boolean", True,
       "read idle plaintext connections (no SASL, no TLS, no authorizer) on a native epoll thread that serves "
       "their Produce requests without the event loop when the native Produce path needs no decision of the "
       "broker's (partitions this broker leads; plain batches and idempotent producers' batches next in sequence, "
       "checked in the partition's producer table, not transactional ones; acks=0/1, acks=all on an unreplicated "
       "partition; "
       "no client quota, no request tracing). A request whose partitions all have one replica and are not compacted "
       "is answered at once (the front moves their high watermarks itself) and accounted by the event loop within "
       "klog.network.native.front.account.interval.ms; other answers are sent once the event loop has accounted "
       "the appends (one wake-up for many requests); the first other request gives the connection back to the "
       "event loop until it is idle again. Needs klog.produce.native.enable and klog.network.writer.thread.enable"),
    _k("klog.network.native.front.account.interval.ms", "int", 5,
       "the longest the event loop waits to account the Produce requests the native front answered itself (their "
       "metrics, the wake-ups of follower fetches and of Python's long polls; a long poll waiting in Python for one "
       "of their partitions has it accounted at once): one event loop wake-up for all the requests of an interval "
       "instead of one for every few. 0: after every read of the front's, as the answers it holds",
       at_least(0)),
    _k("klog.network.native.front.frame.max.bytes", "int", 2 * 1024 * 1024,
       "the largest Produce frame the native front reads whole, into a buffer of its own freed once the frame is "
       "served (a throughput producer's request: batch.size bytes for each of many partitions); larger frames, "
       "frames it does not serve (judged from their first bytes) and frames over "
       "klog.network.native.front.buffer.max.bytes give the connection back to the event loop. Bounded by "
       "socket.request.max.bytes; 65536 or less: every frame over the front's 64 KiB read buffer goes to the event "
       "loop", at_least(0)),
    _k("klog.network.native.front.buffer.max.bytes", "long", 16 * 1024 * 1024,
       "bytes the native front holds across connections in the buffers of large frames "
       "(klog.network.native.front.frame.max.bytes), also bounded by queued.max.request.bytes when that is set; a "
       "large frame that does not fit is read by the event loop", at_least(0)),
    _k("klog.network.native.front.fetch.enable", "boolean", True,
       "the native front also serves a consumer's Fetch the native Fetch path serves without a decision of the "
       "broker's (sessionless or a session's incremental fetch of routed partitions), without the event loop: "
       "answered at once, or, nothing to answer yet, parked in the native wait table, which answers it at "
       "max_wait_ms or when a high watermark moves; any other Fetch gives the connection back to the event loop. "
       "Needs klog.network.native.front.enable, klog.fetch.native.enable and "
       "klog.fetch.native.wait.max.parked > 0"),
    _k("klog.tls.engine", "string", "native",
       "what serves the TLS of the broker's SSL and SASL_SSL listeners: native, klog's native TLS session (rustls, "
       "klog._native.TlsServerSession) over a plain TCP transport, every record of a socket read decrypted in one "
       "call; ssl, Python's ssl module (OpenSSL) through uvloop's SSL transport. Both take the same ssl.* "
       "settings; native offers TLS 1.2's ECDHE AES-GCM and ChaCha20-Poly1305 suites and TLS 1.3's (ssl also "
       "OpenSSL's CBC suites) and RSA, ECDSA P-256/P-384/P-521 and Ed25519 keys (ssl also Ed448, DSA, in the "
       "keystore or as the CAs of client certificates); left at its default, a listener whose settings native "
       "cannot serve is served by ssl (with a warning), at start-up or from a dynamic change of its stores on; "
       "set to native such settings are refused. The controller listener is served by the ssl module either way",
       one_of("ssl", "native")),
    _k("klog.fetch.native.enable", "boolean", True,
       "serve common Fetch requests (a consumer's fetch of partitions this broker leads, read_committed or not, "
       "sessionless or a session's incremental fetch; a replica's fetch judged a plain read; no client "
       "quota) in one native call: decode, reads below the high watermark (a replica's to the log end), the long "
       "poll's wait and the encoded answer with the records as sendfile regions; every other request takes the "
       "Python path. false: every Fetch takes the Python path"),
    _k("klog.heartbeat.fast.enable", "boolean", True,
       "answer a classic group's common Heartbeat (a member of a Stable group at its generation, with its member "
       "and group instance ids, on the group's coordinator; no authorizer, client quota or request tracing) on the "
       "connection: its few fields read, the member's session deadline moved on as the handler does, and the "
       "handler's encoded NONE answer sent; every other Heartbeat takes the handler. false: every Heartbeat takes "
       "the handler"),
    _k("klog.fetch.native.wait.max.parked", "int", 10000,
       "the most long polls of the native Fetch path parked natively at once, broker-wide (each connection has "
       "at most one: it serves its requests in order): a Fetch with nothing to answer yet waits in a native "
       "table, answered without the event loop when a high watermark moves (a replica's: an append) or at its "
       "max_wait_ms; beyond "
       "the limit, or on TLS connections, the wait is the Python path's. 0: every wait is the Python path's",
       at_least(0)),
    _k("klog.produce.record.validation.enable", "boolean", True,
       "false skips the record-level checks of produced batches (the log still checks CRC and counts); only for "
       "measuring their cost: Kafka always makes them"),
    _k("klog.fetch.sendfile.enable", "boolean", True,
       "send fetched segment data with zero-copy sendfile on plaintext connections"),
    _k("klog.network.writer.thread.enable", "boolean", True,
       "send responses from a native writer thread (Linux): the event loop queues them and goes on with the "
       "next request; false sends them from the event loop"),
    _k("klog.event.loop.slice.us", "int", 0,
       "CPU time slice (microseconds, 100-100000) the event-loop thread asks the Linux 6.12+ scheduler for: a "
       "shorter slice makes it run sooner after each wake-up on a busy machine; 0 keeps the kernel default",
       lambda v: None if v == 0 or 100 <= v <= 100_000 else f"must be 0 or 100-100000, got {v}"),
    _k("klog.log.max.open.segment.files", "int", None,
       "sealed segment files kept open at once across all partitions (the least recently used idle ones are "
       "closed and reopened on demand; files being sent to a client stay open); default 10000, capped at half "
       "the process's open-files limit", at_least(1)),
    _k("klog.max.partitions.per.broker", "int", None,
       "partitions this broker may hold (CreateTopics/CreatePartitions beyond it are refused with "
       "POLICY_VIOLATION; the broker's internal topics are counted but never refused); default: half the "
       "descriptors left by the open-files limit after a fixed reserve, the listen backlog and "
       "klog.log.max.open.segment.files (each partition holds one open file, each connection two)", at_least(1)),
    _k("klog.fetch.sendfile.min.bytes", "int", 64 * 1024,
       "fetch responses with less segment data than this are copied and sent with their header in one write "
       "instead of a write plus a sendfile", at_least(0)),
    _k("klog.metrics.listener", "string", "",
       "HOST:PORT of the Prometheus /metrics HTTP listener (e.g. 127.0.0.1:9644; port 0 picks a free one); "
       "empty: no listener and no metrics kept", _metrics_listener),
    # client metrics (KIP-714): what GetTelemetrySubscriptions/PushTelemetry accept and what the broker keeps
    _k("telemetry.max.bytes", "int", 1048576, "largest metrics payload a client may push (PushTelemetry answers "
       "TELEMETRY_TOO_LARGE above it)", at_least(1)),
    _k("klog.telemetry.max.clients", "int", 1000,
       "client instances whose subscription state and last pushed metrics are kept and exposed on the Prometheus "
       "endpoint (the least recently seen is dropped beyond it; Kafka keeps 16384 instances without exposing them)",
       at_least(1)),
    _k("klog.telemetry.expiry.intervals", "int", 3,
       "a client instance that neither asked nor pushed for this many of its push intervals is forgotten and its "
       "metrics leave the Prometheus endpoint (Kafka's factor is 3)", at_least(1)),
    # producer ids and transactions
    _k("producer.id.expiration.ms", "int", 86400000, "forget idle producer ids after this long", at_least(1)),
    _k("producer.id.expiration.check.interval.ms", "int", 600000,
       "how often idle producer ids are looked for (producer.id.expiration.ms)", at_least(1), internal=True),
    # the transaction coordinator (klog.broker.transactions) and its __transaction_state topic
    _k("transactional.id.expiration.ms", "int", 604800000,
       "forget a transactional id (its producer id and epoch) when it has not been used for this long",
       at_least(1)),
    _k("transaction.max.timeout.ms", "int", 900000,
       "largest transaction.timeout.ms a producer may ask for (InitProducerId answers "
       "INVALID_TRANSACTION_TIMEOUT above it)", at_least(1)),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
       "how often the coordinator aborts the transactions open longer than their timeout", at_least(1)),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
       "how often the coordinator removes expired transactional ids (transactional.id.expiration.ms)",
       at_least(1)),
    _k("transaction.state.log.replication.factor", "short", 3,
       "replication factor of __transaction_state (capped at the live brokers; a single node uses 1)",
       at_least(1)),
    _k("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state", at_least(1)),
    _k("transaction.state.log.num.partitions", "int", 50, "partitions of __transaction_state", at_least(1)),
    _k("transaction.state.log.segment.bytes", "int", 104857600, "segment size of __transaction_state",
       at_least(1)),
    _k("transaction.state.log.load.buffer.size", "int", 5242880,
       "bytes read at a time when a __transaction_state partition is loaded", at_least(1)),
    _k("transaction.partition.verification.enable", "boolean", True,
       "verify with the transaction coordinator that a partition is in the producer's transaction before its "
       "first transactional batch is appended (KIP-890)"),
    _k("klog.transaction.completion.wait.ms", "int", 100,
       "how long a request about a transactional id whose previous transaction's markers are still being written "
       "(AddPartitionsToTxn, AddOffsetsToTxn, InitProducerId, a partition leader adding its partition) waits for "
       "them to complete before it is answered CONCURRENT_TRANSACTIONS; 0 answers at once, as Kafka does (the "
       "client then retries after 20 ms or more)", at_least(0)),
    _k("transaction.two.phase.commit.enable", "boolean", False,
       "allow producers to keep prepared transactions across restarts (KIP-939); klog refuses "
       "InitProducerId's enable2Pc while this is false, as Kafka does"),
    _k("share.coordinator.state.topic.replication.factor", "short", 3, "replication factor of __share_group_state "
       "(capped at the live brokers when it is created)", at_least(1)),
    _k("share.coordinator.state.topic.min.isr", "short", 2, "min.insync.replicas of __share_group_state",
       at_least(1)),
    # consumer groups and offsets (used by klog.broker.groups)
    _k("group.initial.rebalance.delay.ms", "int", 3000, "wait for more members before the first rebalance",
       at_least(0)),
    _k("group.min.session.timeout.ms", "int", 6000, "smallest session timeout a member may ask for",
       at_least(0)),
    _k("group.max.session.timeout.ms", "int", 1800000, "largest session timeout a member may ask for",
       at_least(0)),
    _k("group.max.size", "int", INT_MAX, "members allowed in one group", at_least(1)),
    _k("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "streams"],
       "group protocols enabled", one_of("classic", "consumer", "share", "streams")),
    _k("group.consumer.session.timeout.ms", "int", 45000, "consumer protocol session timeout", at_least(1)),
    _k("group.consumer.min.session.timeout.ms", "int", 45000, "consumer protocol min session timeout",
       at_least(1)),
    _k("group.consumer.max.session.timeout.ms", "int", 60000, "consumer protocol max session timeout",
       at_least(1)),
    _k("group.consumer.heartbeat.interval.ms", "int", 5000, "consumer protocol heartbeat interval",
       at_least(1)),
    _k("group.consumer.min.heartbeat.interval.ms", "int", 5000, "consumer protocol min heartbeat interval",
       at_least(1)),
    _k("group.consumer.max.heartbeat.interval.ms", "int", 15000, "consumer protocol max heartbeat interval",
       at_least(1)),
    _k("group.consumer.max.size", "int", INT_MAX, "members allowed in one consumer-protocol group",
       at_least(1)),
    _k("group.consumer.assignors", "list", ["uniform", "range"], "server-side assignors"),
    _k("group.consumer.assignment.interval.ms", "int", 1000,
       "interval between a consumer group's assignments", at_least(0)),
    _k("group.consumer.min.assignment.interval.ms", "int", 0, "smallest consumer.assignment.interval.ms",
       at_least(0)),
    _k("group.consumer.max.assignment.interval.ms", "int", 15000, "largest consumer.assignment.interval.ms",
       at_least(0)),
    _k("group.consumer.assignor.offload.enable", "boolean", True, _KAFKA_ONLY, no_effect=True, internal=True),
    _k("group.consumer.migration.policy", "string", "bidirectional",
       "online conversion of a group between the classic and consumer protocols: upgrade (a consumer-protocol "
       "member joins a classic group), downgrade (the last consumer-protocol member leaves), both or neither",
       one_of("bidirectional", "upgrade", "downgrade", "disabled", case_insensitive=True)),
    # streams groups (KIP-1071; klog.broker.groups.streams), Kafka 4.3's names, defaults and bounds
    _k("group.streams.session.timeout.ms", "int", 45000, "streams group session timeout", at_least(1)),
    _k("group.streams.min.session.timeout.ms", "int", 45000, "streams group min session timeout", at_least(1)),
    _k("group.streams.max.session.timeout.ms", "int", 60000, "streams group max session timeout", at_least(1)),
    _k("group.streams.heartbeat.interval.ms", "int", 5000, "streams group heartbeat interval", at_least(1)),
    _k("group.streams.min.heartbeat.interval.ms", "int", 5000, "streams group min heartbeat interval",
       at_least(1)),
    _k("group.streams.max.heartbeat.interval.ms", "int", 15000, "streams group max heartbeat interval",
       at_least(1)),
    _k("group.streams.max.size", "int", INT_MAX, "members allowed in one streams group", at_least(1)),
    _k("group.streams.num.standby.replicas", "int", 0, "standby replicas of each task", at_least(0)),
    _k("group.streams.max.standby.replicas", "int", 2, "largest streams.num.standby.replicas a group may set",
       at_least(0)),
    _k("group.streams.initial.rebalance.delay.ms", "int", 3000,
       "wait for more members of a new streams group before its first assignment", at_least(0)),
    _k("group.streams.assignment.interval.ms", "int", 1000, "interval between a streams group's assignments",
       at_least(0)),
    _k("group.streams.min.assignment.interval.ms", "int", 0, "smallest streams.assignment.interval.ms",
       at_least(0)),
    _k("group.streams.max.assignment.interval.ms", "int", 15000, "largest streams.assignment.interval.ms",
       at_least(0)),
    _k("group.streams.assignor.offload.enable", "boolean", True, _KAFKA_ONLY, no_effect=True, internal=True),
    # share groups (KIP-932; klog.broker.groups.share and klog.broker.share)
    _k("group.share.session.timeout.ms", "int", 45000, "share group session timeout", at_least(1)),
    _k("group.share.min.session.timeout.ms", "int", 45000, "share group min session timeout", at_least(1)),
    _k("group.share.max.session.timeout.ms", "int", 60000, "share group max session timeout", at_least(1)),
    _k("group.share.heartbeat.interval.ms", "int", 5000, "share group heartbeat interval", at_least(1)),
    _k("group.share.min.heartbeat.interval.ms", "int", 5000, "share group min heartbeat interval", at_least(1)),
    _k("group.share.max.heartbeat.interval.ms", "int", 15000, "share group max heartbeat interval",
       at_least(1)),
    _k("group.share.max.size", "int", 200, "members allowed in one share group", in_range(1, 1000)),
    _k("group.share.assignors", "list", ["simple"], "share group server-side assignors"),
    _k("group.share.assignment.interval.ms", "int", 1000, "interval between a share group's assignments",
       at_least(0)),
    _k("group.share.min.assignment.interval.ms", "int", 0, "smallest share.assignment.interval.ms", at_least(0)),
    _k("group.share.max.assignment.interval.ms", "int", 15000, "largest share.assignment.interval.ms",
       at_least(0)),
    _k("group.share.assignor.offload.enable", "boolean", True, _KAFKA_ONLY, no_effect=True, internal=True),
    _k("group.share.record.lock.duration.ms", "int", 30000,
       "how long a share consumer holds the records it acquired before they are redelivered", at_least(1)),
    _k("group.share.min.record.lock.duration.ms", "int", 15000, "smallest share record lock duration",
       at_least(1)),
    _k("group.share.max.record.lock.duration.ms", "int", 60000, "largest share record lock duration",
       at_least(1)),
    _k("group.share.delivery.count.limit", "int", 5,
       "deliveries of a share-group record before it is archived", in_range(2, 10)),
    _k("group.share.min.delivery.count.limit", "int", 2, "smallest share delivery count limit", at_least(2)),
    _k("group.share.max.delivery.count.limit", "int", 10, "largest share delivery count limit", at_least(2)),
    _k("group.share.partition.max.record.locks", "int", 2000,
       "in-flight (acquired, not yet acknowledged) records per share-partition", at_least(100)),
    _k("group.share.min.partition.max.record.locks", "int", 100, "smallest per-partition record lock limit",
       at_least(1)),
    _k("group.share.max.partition.max.record.locks", "int", 4000, "largest per-partition record lock limit",
       at_least(1)),
    _k("group.share.max.share.sessions", "int", 2000, "share sessions a broker keeps", at_least(1)),
    _k("group.share.persister.class.name", "string", "org.apache.kafka.server.share.persister.DefaultStatePersister",
       _KAFKA_ONLY, no_effect=True, internal=True),
    _k("share.fetch.purgatory.purge.interval.requests", "int", 1000, _KAFKA_ONLY, no_effect=True),
    _k("share.coordinator.state.topic.num.partitions", "int", 50, "partitions of __share_group_state",
       at_least(1)),
    _k("share.coordinator.state.topic.segment.bytes", "int", 104857600, "segment size of __share_group_state",
       at_least(1)),
    _k("share.coordinator.threads", "int", 1, _KAFKA_ONLY, no_effect=True),
    _k("share.coordinator.snapshot.update.records.per.snapshot", "int", 500,
       "ShareUpdate records a share coordinator writes for a share-partition between two ShareSnapshots",
       in_range(0, 500)),
    _k("share.coordinator.write.timeout.ms", "int", 5000, "how long a share-state write waits for the ISR of its "
       "__share_group_state partition (and is retried while that partition has no ready leader)", at_least(1)),
    _k("share.coordinator.load.buffer.size", "int", 5242880, "read size when loading __share_group_state",
       at_least(1)),
    _k("share.coordinator.state.topic.compression.codec", "int", 0, "compression of share-state batches",
       in_range(0, 4)),
    _k("share.coordinator.append.linger.ms", "int", -1, _KAFKA_ONLY, no_effect=True),
    _k("share.coordinator.state.topic.prune.interval.ms", "int", 300000,
       "how often the share coordinator deletes the __share_group_state records no share-partition's state needs any "
       "more (those below the earliest of their latest ShareSnapshots)", at_least(1), internal=True),
    _k("share.coordinator.cold.partition.snapshot.interval.ms", "int", 300000,
       "how often the share coordinator writes a new ShareSnapshot of the share-partitions whose latest snapshot is "
       "at least this old (unless nothing was snapshotted since the last time), so that an idle share-partition does "
       "not hold back the pruning of its __share_group_state partition", at_least(1), internal=True),
    _k("share.coordinator.cached.buffer.max.bytes", "int", 1048588, _KAFKA_ONLY, no_effect=True),
    _k("group.coordinator.threads", "int", 4, _KAFKA_ONLY, no_effect=True),
    _k("offsets.topic.num.partitions", "int", 50, "partitions of __consumer_offsets", at_least(1)),
    _k("offsets.topic.replication.factor", "short", 3, "replication factor of __consumer_offsets "
       "(a single node uses 1)", at_least(1)),
    _k("offsets.topic.segment.bytes", "int", 104857600, "segment size of __consumer_offsets", at_least(1)),
    _k("offsets.topic.compression.codec", "int", 0, "compression of offset commit batches",
       in_range(0, 4)),
    _k("offsets.retention.minutes", "int", 10080, "keep committed offsets of empty groups this long",
       at_least(1)),
    _k("offsets.retention.check.interval.ms", "long", 600000, "how often stale offsets are removed",
       at_least(1)),
    _k("offsets.commit.timeout.ms", "int", 5000, "how long an offset commit (any group write) waits for the ISR "
       "of its __consumer_offsets partition to have it; COORDINATOR_NOT_AVAILABLE after", at_least(1)),
    _k("offsets.load.buffer.size", "int", 5242880, "read size when loading __consumer_offsets",
       at_least(1)),
    _k("offset.metadata.max.bytes", "int", 4096, "largest metadata string of a committed offset",
       at_least(0)),
]}


BROKER_KEYS.update(SECURITY_KEYS)
BROKER_KEYS.update(BROKER_SECURITY_KEYS)
BROKER_KEYS.update(KAFKA_COMPAT_KEYS)

#: Keys Kafka 4 removed with ZooKeeper and still starts with, unused (its "were supplied but are not used yet"
#: warning): the password encoder of KIP-226, which encrypted dynamic password configs in ZooKeeper. In KRaft mode
#: Kafka stores sensitive dynamic configs (``listener.name.<l>.ssl.keystore.password``, ...) unencrypted in the
#: metadata log's ConfigRecords and DescribeConfigs answers them as null and sensitive; klog does the same. These
#: keys are accepted with a warning, and neither described nor settable at runtime, as on Kafka 4.
UNUSED_KAFKA_KEYS = frozenset({"password.encoder.secret", "password.encoder.old.secret",
                               "password.encoder.keyfactory.algorithm", "password.encoder.cipher.algorithm",
                               "password.encoder.key.length", "password.encoder.iterations"})


def listener_key(key: str) -> tuple[str, str, str, ConfigKey]:
    """A ``listener.name.<listener>.<key>`` setting's (listener in upper case, the key as the listener's settings
    store it: ``<mechanism>.<key>`` for a per-mechanism SASL setting, the broker config it overrides (Kafka's
    synonym: ``sasl.jaas.config`` for ``plain.sasl.jaas.config``), that config's spec); a ConfigError for a name
    Kafka does not take."""
    match = _LISTENER_KEY_RE.match(key)
    if match is None:
        raise ConfigError(key, "expected listener.name.<listener>.<key>")
    rest = match["rest"]
    mechanism, _, mechanism_key = rest.partition(".")
    if rest in SECURITY_KEYS or rest in _LISTENER_OWN_KEYS:
        return match["listener"].upper(), rest, rest, SECURITY_KEYS.get(rest) or BROKER_KEYS[rest]
    if mechanism.upper() in SASL_MECHANISMS + ("GSSAPI", "OAUTHBEARER") and mechanism_key in _MECHANISM_KEYS:
        return (match["listener"].upper(), f"{mechanism.lower()}.{mechanism_key}", mechanism_key,
                SECURITY_KEYS[mechanism_key])
    raise ConfigError(key, "unknown listener config: listener.name.<listener>.<key> takes an ssl.* or "
                           "sasl.* broker config, or <mechanism>.sasl.jaas.config")


class BrokerConfig(Mapping[str, Any]):
    """Typed, validated broker configuration. ``config["log.segment.bytes"]`` gives the effective value."""

    def __init__(self, props: Mapping[str, Any] | None = None, *, topic_store: Any = None) -> None:
        self.originals: dict[str, Any] = {}
        values = {key: spec.default for key, spec in BROKER_KEYS.items()}
        #: ``listener.name.<LISTENER>.<key>`` settings by listener name (upper case), then key (with a
        #: ``<mechanism>.`` prefix, lower case, for per-mechanism SASL settings)
        self.listener_settings: dict[str, dict[str, Any]] = {}
        #: settings Kafka 4 accepts and does not use (:data:`UNUSED_KAFKA_KEYS`), by name
        self.unused: dict[str, Any] = {}
        #: ``config.providers.<alias>.class`` / ``.param.<name>`` settings (not KafkaConfig keys either)
        self.provider_settings: dict[str, Any] = {}
        for key, raw in resolve_providers(props or {}).items():
            key = key.strip()
            spec = BROKER_KEYS.get(key)
            if spec is None and key.startswith("listener.name."):
                self._listener_setting(key, raw)
                continue
            if spec is None and is_provider_key(key):
                self.provider_settings[key] = raw
                continue
            if spec is None and key in UNUSED_KAFKA_KEYS:
                self.unused[key] = raw
                continue
            if spec is None:
                import difflib  # only for this error's hint

                close = difflib.get_close_matches(key, BROKER_KEYS, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigError(key, f"unknown broker config ({hint}klog accepts Kafka's broker config names; "
                                       "see docs/operations.md)")
            values[key] = spec.parse(raw)
            self.originals[key] = values[key]
        self._values = values
        #: the dynamic broker defaults of topic configs (DYNAMIC_LOG_KEYS): key -> [(parsed value, source)], this
        #: broker's own ConfigRecord first (it wins), then the cluster default's (resource "")
        self._dynamic_log: dict[str, list[tuple[Any, ConfigSource]]] = {}
        self._derive()

    def _listener_setting(self, key: str, raw: Any) -> None:
        listener, stored, _, spec = listener_key(key)
        try:
            value = spec.parse(raw)
        except ConfigError as exc:
            raise ConfigError(key, str(exc).partition(": ")[2]) from None
        self.listener_settings.setdefault(listener, {})[stored] = value
        self.originals[key] = value

    def listener_setting(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """``key`` as listener ``listener`` sees it: ``listener.name.<listener>.<mechanism>.<key>``, then
        ``listener.name.<listener>.<key>``, then the broker-wide ``key``."""
        own = self.listener_settings.get(listener.upper(), {})
        if mechanism is not None and f"{mechanism.lower()}.{key}" in own:
            return own[f"{mechanism.lower()}.{key}"]
        if key in own:
            return own[key]
        return self._values[key]

    def listener_security(self, listener: str) -> dict[str, Any]:
        """Every ssl.*/sasl.* setting as ``listener`` sees it (per-mechanism ones under ``<mechanism>.<key>``)."""
        settings = {key: self.listener_setting(listener, key) for key in SECURITY_KEYS}
        settings.update(self.listener_settings.get(listener.upper(), {}))
        for key in ("connections.max.reauth.ms", "connection.failed.authentication.delay.ms"):
            settings[key] = self.listener_setting(listener, key)
        return settings

    # Mapping protocol
    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def is_set(self, key: str) -> bool:
        return key in self.originals

    def _derive(self) -> None:
        v = self._values
        if v["broker.id"] != -1:
            if self.is_set("node.id") and v["node.id"] != v["broker.id"]:
                raise ConfigError("broker.id", f"{v['broker.id']} differs from node.id {v['node.id']}")
            v["node.id"] = v["broker.id"]
        self.node_id: int = v["node.id"]
        if self.is_set("log.dirs") and not v["log.dirs"]:
            raise ConfigError("log.dirs", "is empty: name at least one data directory (or leave it unset for "
                                          "log.dir, default ./klog-data)")
        if not v["log.dirs"] and not v["log.dir"]:
            raise ConfigError("log.dir", "is empty: name the data directory")
        self.log_dirs: list[str] = [os.path.abspath(d) for d in (v["log.dirs"] or v["log.dir"])]
        #: log.dirs (or log.dir) as written, which cordoned.log.dirs entries name
        self.configured_log_dirs: list[str] = list(v["log.dirs"] or v["log.dir"])
        problem = cordoned_log_dirs_problem(v[CORDONED_LOG_DIRS], self.configured_log_dirs)
        if problem is not None:
            raise ConfigError(CORDONED_LOG_DIRS, problem)

        protocol_map: dict[str, str] = {}
        for entry in _parse_list(v["listener.security.protocol.map"]):
            name, sep, protocol = entry.partition(":")
            if not sep or not name or not protocol:
                raise ConfigError("listener.security.protocol.map", f"{entry!r} is not NAME:PROTOCOL")
            protocol_map[name.strip().upper()] = protocol.strip().upper()
        controller_names = {n.upper() for n in (v["controller.listener.names"] or [])}
        all_listeners = parse_listeners("listeners", v["listeners"], protocol_map)
        served = [lst for lst in all_listeners if lst.name not in controller_names]
        #: the listeners of the controller role (raft peers connect to them), in controller.listener.names order
        self.controller_listeners: list[Listener] = [lst for lst in all_listeners if lst.name in controller_names]
        self.roles: frozenset[str] = frozenset(r.strip().lower() for r in v["process.roles"])
        #: this process runs a member of a multi-node controller quorum (Kafka's KRaft properties)
        self.quorum_mode: bool = bool(v["controller.quorum.voters"]) or (
            bool(v["controller.quorum.bootstrap.servers"]) and not self._own_quorum_of_one(v))
        if not self.quorum_mode and self.roles == {"broker"} and self.is_set("process.roles"):
            raise ConfigError("controller.quorum.voters", "process.roles=broker follows a controller quorum: set "
                              "controller.quorum.voters or controller.quorum.bootstrap.servers")
        #: this process serves clients (today's single node, or the broker role of a quorum node)
        self.serves_clients: bool = not self.quorum_mode or "broker" in self.roles
        if self.quorum_mode and "broker" not in self.roles:
            if served:
                raise ConfigError("listeners", f"process.roles=controller: listener {served[0].name} is not in "
                                  "controller.listener.names (a controller-only node serves no clients)")
        elif not served:
            raise ConfigError("listeners", "no client listener (all are controller listeners)")
        for lst in all_listeners:
            if lst.security_protocol not in _SECURITY_PROTOCOLS:
                raise ConfigError("listener.security.protocol.map", f"listener {lst.name}: "
                                  f"{lst.security_protocol!r} is not one of {', '.join(_SECURITY_PROTOCOLS)}")
        self.listeners: list[Listener] = served
        names = {lst.name for lst in all_listeners} | controller_names
        for name in v["early.start.listeners"] or []:
            if name.upper() not in names:   # Kafka's KafkaConfig check
                raise ConfigError("early.start.listeners", f"{name} is not a listener of listeners or "
                                  "controller.listener.names")
        if v["replica.socket.timeout.ms"] < v["replica.fetch.wait.max.ms"]:
            raise ConfigError("replica.socket.timeout.ms", "should always be at least replica.fetch.wait.max.ms to "
                              "prevent unnecessary socket timeouts")
        #: the listener other brokers are reached on (inter.broker.listener.name, else the one named after
        #: security.inter.broker.protocol, as Kafka resolves them); None on a controller-only node
        self.inter_broker_listener: Listener | None = self._inter_broker_listener(v, served)
        if v["advertised.listeners"]:
            advertised = parse_listeners("advertised.listeners", v["advertised.listeners"], protocol_map)
            by_name = {lst.name: lst for lst in advertised}
            missing = [lst.name for lst in served if lst.name not in by_name]
            if missing:
                raise ConfigError("advertised.listeners", f"no entry for listener {missing[0]}")
            self.advertised: dict[str, Listener] = {lst.name: by_name[lst.name] for lst in served}
        else:
            self.advertised = {lst.name: lst for lst in served}

        for lst in self.advertised.values():
            if lst.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners", f"{lst.uri()}: clients cannot connect to the "
                                  "meta-address; set advertised.listeners to a routable host")
        if v["log.retention.ms"] is not None:
            self.retention_ms = v["log.retention.ms"]
        elif v["log.retention.minutes"] is not None:
            self.retention_ms = v["log.retention.minutes"] * 60_000
        else:
            self.retention_ms = v["log.retention.hours"] * 3_600_000
        if self.retention_ms < 0:
            self.retention_ms = -1
        if v["log.roll.ms"] is not None:
            self.roll_ms = v["log.roll.ms"]
        else:
            self.roll_ms = v["log.roll.hours"] * 3_600_000
        if v["default.replication.factor"] > 1 and not self.quorum_mode:
            # A single node cannot host more replicas; Kafka would fail every auto-create. Say so early.
            raise ConfigError("default.replication.factor", "klog is a single node: must be 1")

    def _inter_broker_listener(self, v: Mapping[str, Any], served: list[Listener]) -> Listener | None:
        """Kafka's resolution: ``inter.broker.listener.name``, or the listener named as
        ``security.inter.broker.protocol`` (both set is an error). With neither set Kafka takes the listener named
        PLAINTEXT; klog, when there is none, the first served listener."""
        if not served:
            return None
        by_name = {lst.name: lst for lst in served}
        named = v["inter.broker.listener.name"]
        if named and self.is_set("security.inter.broker.protocol"):
            raise ConfigError("inter.broker.listener.name", "only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol may be set")
        if named:
            key, name = "inter.broker.listener.name", str(named).strip().upper()
        elif self.is_set("security.inter.broker.protocol"):
            key, name = "security.inter.broker.protocol", str(v["security.inter.broker.protocol"]).upper()
        else:
            return by_name.get("PLAINTEXT", served[0])
        if name not in by_name:
            raise ConfigError(key, f"{name} is not a listener of this broker (listeners: "
                              f"{', '.join(by_name)}; controller listeners cannot be the inter-broker listener)")
        return by_name[name]

    def _own_quorum_of_one(self, v: Mapping[str, Any]) -> bool:
        """Kafka's sample server.properties (``controller.quorum.bootstrap.servers`` naming only this node's own
        controller listener) on a directory not formatted with an initial voter set: the single node that is its
        own quorum, as klog-broker always was."""
        import os.path

        from klog.metadata.storage import INITIAL_VOTERS_COPY

        servers = [s for s in v["controller.quorum.bootstrap.servers"] if s.strip()]
        if "controller" not in self.roles or len(servers) != 1:
            return False
        port = servers[0].rpartition(":")[2].strip()
        metadata_dir = v["metadata.log.dir"] or self.log_dirs[0]
        formatted = os.path.exists(os.path.join(metadata_dir, INITIAL_VOTERS_COPY))
        return not formatted and any(str(lst.port) == port for lst in self.controller_listeners)

    def set_dynamic_log_configs(self, own: Mapping[str, str], cluster_default: Mapping[str, str]) -> bool:
        """The dynamic broker configs of this broker (its resource) and of every broker (resource ""), as the
        metadata image holds them: those of DYNAMIC_LOG_KEYS become the topic defaults. True if any changed. The
        controller validated the values; one that does not parse here is left out (and logged)."""
        dynamic: dict[str, list[tuple[Any, ConfigSource]]] = {}
        for values, source in ((own, ConfigSource.DYNAMIC_BROKER_CONFIG),
                               (cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
            for key, raw in sorted(values.items()):
                if key in DYNAMIC_LOG_KEYS and raw is not None:
                    try:
                        dynamic.setdefault(key, []).append((BROKER_KEYS[key].parse(raw), source))
                    except ConfigError as exc:
                        logging.getLogger("klog.config").warning("ignoring dynamic broker config: %s", exc)
        changed = dynamic != self._dynamic_log
        self._dynamic_log = dynamic
        return changed

    def dynamic_topic_defaults(self, topic_key: str) -> list[tuple[str, Any, ConfigSource]]:
        """(broker key, value, source) of each dynamic broker default of the topic config, the one in effect
        first (Kafka's synonyms order)."""
        broker_key = TOPIC_TO_BROKER_KEY.get(topic_key)
        if broker_key is None:
            return []
        return [(broker_key, value, source) for value, source in self._dynamic_log.get(broker_key, [])]

    def topic_default(self, topic_key: str) -> Any:
        """The broker-wide default of a topic config (e.g. ``segment.bytes`` from ``log.segment.bytes``): a dynamic
        broker config's value, else the static one's."""
        dynamic = self.dynamic_topic_defaults(topic_key)
        return dynamic[0][1] if dynamic else self.static_topic_default(topic_key)

    def static_topic_default(self, topic_key: str) -> Any:
        """The topic config's default from server.properties (or Kafka's default)."""
        if topic_key == "retention.ms":
            return self.retention_ms
        if topic_key == "segment.ms":
            return self.roll_ms
        if topic_key == "segment.jitter.ms" and self._values["log.roll.jitter.ms"] is None:
            return self._values["log.roll.jitter.hours"] * 3_600_000
        if topic_key == "flush.ms":
            value = self._values["log.flush.interval.ms"]
            return TOPIC_KEYS["flush.ms"].default if value is None else value
        broker_key = TOPIC_TO_BROKER_KEY.get(topic_key)
        if broker_key is None or broker_key not in self._values:
            return TOPIC_KEYS[topic_key].default
        return self._values[broker_key]

    def topic_default_source(self, topic_key: str) -> tuple[str, bool]:
        """(broker key supplying the default, whether it was set in the broker's properties)."""
        if topic_key == "retention.ms":
            for key in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
                if self.is_set(key):
                    return key, True
            return "log.retention.hours", False
        for key, synonyms in _BROKER_SYNONYMS.items():
            if topic_key == key and topic_key != "retention.ms":
                set_key = next((k for k in synonyms if self.is_set(k)), None)
                return (set_key, True) if set_key else (synonyms[-1], False)
        broker_key = TOPIC_TO_BROKER_KEY.get(topic_key, topic_key)
        return broker_key, self.is_set(broker_key)

    def ignored_keys(self) -> list[str]:
        return sorted(k for k in self.originals if k in BROKER_KEYS and BROKER_KEYS[k].no_effect)


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Parse topic configs given by a client (CreateTopics/AlterConfigs). Raises ConfigError naming the key."""
    return {key: _parse_topic_value(key, raw) for key, raw in configs.items()}


def _parse_topic_value(key: str, raw: Any) -> Any:
    """One topic config's parsed value; ConfigError names the key (unknown, null or invalid)."""
    spec = TOPIC_KEYS.get(key)
    if spec is None:
        raise ConfigError(key, "unknown topic config")
    if raw is None:
        raise ConfigError(key, "null value")
    return spec.parse(raw)


class TopicConfigError(ValueError):
    """Topic configs Kafka's controller refuses (INVALID_CONFIG), in its words (LogConfig.validate)."""


#: list topic configs whose entries may not be empty (Kafka's ValidList without empty values: "compact,")
_NO_EMPTY_ENTRIES = frozenset({"cleanup.policy"})
_TIERED_STORAGE_OFF = ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
                       "remote log storage.")


def check_topic_configs(configs: Mapping[str, str | None], default: Callable[[str], Any]) -> dict[str, Any]:
    """The topic configs a client gives a topic (CreateTopics, AlterConfigs), checked as Kafka's controller checks
    them (LogConfig.validate): every name first, then each value, then the values together with ``default`` (a
    topic config's value where ``configs`` have none: the broker's default): min.compaction.lag.ms at most
    max.compaction.lag.ms, and no remote storage (klog has no tiered storage, as a Kafka broker with
    remote.log.storage.system.enable=false). Their parsed values; TopicConfigError says why not in Kafka's words."""
    unknown = next((key for key in configs if key not in TOPIC_KEYS), None)
    if unknown is not None:
        raise TopicConfigError(f"Unknown topic config name: {unknown}")
    parsed: dict[str, Any] = {}
    for key, raw in configs.items():
        if raw is None:
            raise TopicConfigError(f"Null value not supported for topic configs: {key}")
        if key in _NO_EMPTY_ENTRIES and raw.strip() and any(not entry.strip() for entry in raw.split(",")):
            raise TopicConfigError(f"Configuration '{key}' values must not be empty.")
        try:
            parsed[key] = _parse_topic_value(key, raw)
        except ConfigError as exc:
            raise TopicConfigError(exc.kafka_message) from None

    def value(key: str) -> Any:
        return parsed[key] if key in parsed else default(key)

    if value("min.compaction.lag.ms") > value("max.compaction.lag.ms"):
        raise TopicConfigError(f"conflict topic config setting min.compaction.lag.ms "
                               f"({value('min.compaction.lag.ms')}) > max.compaction.lag.ms "
                               f"({value('max.compaction.lag.ms')})")
    if value("remote.storage.enable"):
        raise TopicConfigError(_TIERED_STORAGE_OFF)
    return parsed


class ConfigSource(enum.IntEnum):
    """Where a described config's value comes from (Kafka's DescribeConfigsResponse.ConfigSource)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


#: topic config -> its broker synonyms in Kafka's order, where there are several (ServerTopicConfigSynonyms)
_BROKER_SYNONYMS = {"retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                    "segment.ms": ("log.roll.ms", "log.roll.hours"),
                    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours")}


def _described_override(spec: ConfigKey, raw: str) -> str | None:
    """A topic's own value as Kafka describes it: parsed and written back (``compact , delete`` as
    ``compact,delete``, ``0.50`` as ``0.5``, `` 5000 `` as ``5000``); as stored where it does not parse."""
    try:
        return spec.format(spec.parse(raw))
    except ConfigError:
        return raw


def topic_config_entries(config: BrokerConfig, overrides: Mapping[str, str], keys: list[str] | None, *,
                         include_synonyms: bool, include_documentation: bool = False
                         ) -> list[DescribeConfigsResponseResourceResult]:
    """A topic's effective configs with their sources, from its overrides (as the metadata image holds them) and
    the node's broker defaults: what DescribeConfigs answers on a broker, and CreateTopics (v5+) on the
    controller."""
    entries: list[DescribeConfigsResponseResourceResult] = []
    for name, spec in TOPIC_KEYS.items():
        if keys is not None and name not in keys:
            continue
        default_value = spec.format(config.static_topic_default(name))
        dynamic = config.dynamic_topic_defaults(name)
        # Kafka's ConfigHelper: the broker synonyms (dynamic, static, then default layers, each over the synonyms
        # in order) from the first one naming the primary broker key on: log.retention.hours alone (set or by
        # default) is no synonym of retention.ms, whose log.retention.ms is unset
        primary = TOPIC_TO_BROKER_KEY.get(name)
        chain = _BROKER_SYNONYMS.get(name, (primary,) if primary else ())
        layers: list[DescribeConfigsResponseSynonym] = [
            {"name": key, "value": spec.format(v), "source": src} for key, v, src in dynamic]
        layers += [{"name": k, "value": BROKER_KEYS[k].format(config[k]), "source": ConfigSource.STATIC_BROKER_CONFIG}
                   for k in chain if config.is_set(k)]
        layers += [{"name": k, "value": BROKER_KEYS[k].format(BROKER_KEYS[k].default),
                    "source": ConfigSource.DEFAULT_CONFIG} for k in chain if BROKER_KEYS[k].default is not None]
        first = next((i for i, synonym in enumerate(layers) if synonym["name"] == primary), len(layers))
        synonyms: list[DescribeConfigsResponseSynonym] = layers[first:]
        value: str | None = default_value
        source = synonyms[0]["source"] if synonyms else ConfigSource.DEFAULT_CONFIG
        if dynamic:
            value = spec.format(dynamic[0][1])
        if name in overrides:
            value, source = _described_override(spec, overrides[name]), ConfigSource.TOPIC_CONFIG
            synonyms.insert(0, {"name": name, "value": value, "source": ConfigSource.TOPIC_CONFIG})
        entries.append({
            "name": name, "value": value, "read_only": False, "is_default": source == ConfigSource.DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": False,
            "synonyms": synonyms if include_synonyms else [],
            "config_type": CONFIG_TYPE_CODES.get(spec.type, 0),
            "documentation": spec.doc if include_documentation else None,
        })
    return entries


def load_properties(path: str) -> dict[str, str]:
    """Read a Java .properties file (Kafka's server.properties)."""
    import javaproperties

    try:
        with open(path, encoding="utf-8") as handle:
            return dict(javaproperties.load(handle))
    except OSError as exc:
        raise ConfigError(path, f"cannot read properties file: {exc.strerror}") from None


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(pair, "--override expects key=value")
        overrides[key.strip()] = value
    return overrides
