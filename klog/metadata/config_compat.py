"""Apache Kafka 4.3.1 broker configs klog takes from a Kafka ``server.properties`` without a behaviour of its own
(tiered storage, JMX metrics, purgatories, Java plugins, the broker's own OAUTHBEARER client login, ...): Kafka's
type, default and validator, so a value Kafka refuses at start-up stops klog naming the key, and a value Kafka
takes starts klog. A value that asks for something klog cannot do (a Java class to load, tiered storage on, a
config provider klog lacks) refuses the start naming the key and why, rather than being silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from klog.metadata.config_keys import (
    _KAFKA_ONLY,
    LONG_MAX,
    ConfigKey,
    Validator,
    _k,
    at_least,
    in_range,
    one_of,
)

__all__ = ["JMX_REPORTER", "KAFKA_COMPAT_KEYS"]

#: the metric reporter Kafka adds by default (metric.reporters): klog accepts it and exposes its metrics on
#: klog.metrics.listener (Prometheus) instead of JMX
JMX_REPORTER = "org.apache.kafka.common.metrics.JmxReporter"


def _non_empty(value: Any) -> str | None:
    """Kafka's ConfigDef.NonEmptyString (null passes)."""
    return "String must be non-empty" if value is not None and not str(value).strip() else None


def _unsupported(why: str, allowed: Callable[[Any], bool] = lambda v: not v) -> Callable[[Any], str | None]:
    """Refuse a value klog cannot honour (``why``), accepting those ``allowed`` says are harmless (the default)."""
    return lambda v: None if allowed(v) else f"klog cannot honour {v!r}: {why}"


def _no_effect(kafka_doc: str) -> str:
    return f"{_KAFKA_ONLY}. Kafka: {kafka_doc}"


_JAVA_CLASS = "klog runs no Java plugins; remove the setting"
_TIERED = "klog has no tiered storage"

#: a row of a key klog takes with Kafka's type, default and validator and ignores: (name, type, default, what Kafka
#: does with it, validator)
_NoEffectRow = tuple[str, str, Any, str, Validator | None]


def _key(row: ConfigKey | _NoEffectRow) -> ConfigKey:
    """A row of the table below: a key of its own, or a key with no effect in klog (a password one is sensitive)."""
    if isinstance(row, ConfigKey):
        return row
    name, type_, default, kafka_doc, validator = row
    return _k(name, type_, default, _no_effect(kafka_doc), validator, no_effect=True, sensitive=type_ == "password")


_TABLE: list[ConfigKey | _NoEffectRow] = [
    # tiered storage (KIP-405): klog keeps every segment locally; turning it on is refused
    _k("remote.log.storage.system.enable", "boolean", False, "tiered storage: must stay false (" + _TIERED + ")",
       _unsupported(_TIERED)),
    ("remote.log.storage.manager.impl.prefix", "string", "rsm.config.", "prefix of the properties passed to the "
     "RemoteStorageManager", _non_empty),
    ("remote.log.metadata.manager.impl.prefix", "string", "rlmm.config.", "prefix of the properties passed to the "
     "RemoteLogMetadataManager", _non_empty),
    ("remote.log.storage.manager.class.name", "string", None, "the RemoteStorageManager implementation", _non_empty),
    ("remote.log.storage.manager.class.path", "string", None, "class path of the RemoteStorageManager "
     "implementation", None),
    ("remote.log.metadata.manager.class.name", "string",
     "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
     "the RemoteLogMetadataManager implementation", _non_empty),
    ("remote.log.metadata.manager.class.path", "string", None, "class path of the RemoteLogMetadataManager "
     "implementation", None),
    ("remote.log.metadata.manager.listener.name", "string", None, "listener the RemoteLogMetadataManager connects "
     "to", _non_empty),
    ("remote.log.metadata.custom.metadata.max.bytes", "int", 128, "largest custom metadata a remote storage plugin may "
     "return", at_least(0)),
    ("remote.log.index.file.cache.total.size.bytes", "long", 1073741824, "local space for index files fetched from "
     "remote storage", at_least(1)),
    ("remote.log.manager.thread.pool.size", "int", 2, "remote log manager threads", at_least(1)),
    ("remote.log.manager.copier.thread.pool.size", "int", 10, "threads copying segments to remote "
     "storage", at_least(1)),
    ("remote.log.manager.expiration.thread.pool.size", "int", 10, "threads deleting expired remote "
     "segments", at_least(1)),
    ("remote.log.manager.follower.thread.pool.size", "int", 2, "threads reading followers' highest uploaded remote "
     "offsets", at_least(1)),
    ("remote.log.manager.task.interval.ms", "long", 30000, "interval of the remote log manager's tasks", at_least(1)),
    ("remote.log.reader.threads", "int", 10, "threads serving remote log reads", at_least(1)),
    ("remote.log.reader.max.pending.tasks", "int", 100, "queue of the remote log readers", at_least(1)),
    ("log.local.retention.ms", "long", -2, "default of the topic config local.retention.ms", at_least(-2)),
    ("log.local.retention.bytes", "long", -2, "default of the topic config local.retention.bytes", at_least(-2)),
    ("remote.log.manager.copy.max.bytes.per.second", "long", LONG_MAX, "remote copy quota", at_least(1)),
    ("remote.log.manager.copy.quota.window.num", "int", 11, "samples of the remote copy quota", at_least(1)),
    ("remote.log.manager.copy.quota.window.size.seconds", "int", 1, "sample span of the remote copy "
     "quota", at_least(1)),
    ("remote.log.manager.fetch.max.bytes.per.second", "long", LONG_MAX, "remote fetch quota", at_least(1)),
    ("remote.log.manager.fetch.quota.window.num", "int", 11, "samples of the remote fetch quota", at_least(1)),
    ("remote.log.manager.fetch.quota.window.size.seconds", "int", 1, "sample span of the remote fetch "
     "quota", at_least(1)),
    ("remote.fetch.max.wait.ms", "int", 500, "longest wait of a fetch of remote partitions", at_least(1)),
    ("remote.list.offsets.request.timeout.ms", "long", 30000, "timeout of a remote ListOffsets", at_least(1)),
    ("follower.fetch.last.tiered.offset.enable", "boolean", False, "an empty follower starts after the last tiered "
     "offset (without tiered storage there is none)", None),
    # Java plugins: only their defaults (none, or Kafka's built-in one) are accepted
    _k("create.topic.policy.class.name", "class", None, "a CreateTopicPolicy class: must be unset (" + _JAVA_CLASS
       + ")", _unsupported(_JAVA_CLASS)),
    _k("alter.config.policy.class.name", "class", None, "an AlterConfigPolicy class: must be unset (" + _JAVA_CLASS
       + ")", _unsupported(_JAVA_CLASS)),
    _k("client.quota.callback.class", "class", None, "a ClientQuotaCallback class: must be unset (" + _JAVA_CLASS
       + "; klog applies the client quotas of kafka-client-quotas)", _unsupported(_JAVA_CLASS)),
    _k("metric.reporters", "list", [JMX_REPORTER], "metrics reporter classes: only Kafka's JmxReporter (or none) "
       "is accepted, with no effect (klog's metrics are on klog.metrics.listener, Prometheus)",
       _unsupported(_JAVA_CLASS, lambda v: set(v) <= {JMX_REPORTER})),
    _k("kafka.metrics.reporters", "list", [], "Yammer metrics reporter classes: must be empty (" + _JAVA_CLASS + ")",
       _unsupported(_JAVA_CLASS)),
    ("kafka.metrics.polling.interval.secs", "int", 10, "polling interval of kafka.metrics.reporters", at_least(1)),
    ("metrics.num.samples", "int", 2, "samples of Kafka's metrics", at_least(1)),
    ("metrics.sample.window.ms", "long", 30000, "window of a sample of Kafka's metrics", at_least(1)),
    ("metrics.recording.level", "string", "INFO", "highest recording level of Kafka's metrics: INFO, DEBUG or "
     "TRACE", one_of("INFO", "DEBUG", "TRACE", case_insensitive=True)),
    # KIP-297/KIP-887 config providers (klog.metadata.config_providers resolves their references)
    _k("config.providers", "list", [], "ConfigProvider aliases: config.providers.<alias>.class names Kafka's "
       "FileConfigProvider, DirectoryConfigProvider or EnvVarConfigProvider (any other class refuses the start), "
       "config.providers.<alias>.param.<name> their parameters (allowed.paths, allowlist.pattern); other values "
       "may then read ${<alias>:<path>:<key>} (a key of a properties file, a file of a directory) or "
       "${<alias>:<name>} (an environment variable)"),
    # controllers, registration and shutdown
    ("controller.quorum.fetch.max.bytes", "int", 1048576, "bytes of one Raft Fetch", at_least(1)),
    ("controller.quorum.fetch.snapshot.max.bytes", "int", 1048576, "bytes of one FetchSnapshot", at_least(1)),
    ("controller.socket.timeout.ms", "int", 30000, "socket timeout of controller-to-broker channels", None),
    ("initial.broker.registration.timeout.ms", "int", 60000, "how long a starting broker tries to register", None),
    ("controlled.shutdown.enable", "boolean", True, "controlled shutdown (a klog broker of a quorum always shuts down "
     "controlled, bounded by broker.session.timeout.ms)", None),
    ("early.start.listeners", "list", None, "listeners started before the authorizer is ready (klog starts every "
     "listener once the metadata is loaded); each must be a listener", None),
    ("log.dir.failure.timeout.ms", "long", 30000, "how long a broker may fail to report a failed log dir", at_least(1)),
    ("num.replica.alter.log.dirs.threads", "int", None, "threads moving replicas between log dirs (klog copies on "
     "worker threads, bounded by replica.alter.log.dirs.io.max.bytes.per.second)", None),
    # network and requests
    ("socket.connection.setup.timeout.ms", "long", 10000, "connect timeout of the broker's own connections", None),
    ("socket.connection.setup.timeout.max.ms", "long", 30000, "largest connect timeout of the broker's own "
     "connections", None),
    ("max.request.partition.size.limit", "int", 2000, "partitions one request may be served for", at_least(1)),
    # replication
    _k("replica.socket.timeout.ms", "int", 30000, "request timeout of the replica fetchers' requests to their "
       "leaders, at least replica.fetch.wait.max.ms (unset: klog's fetchers take request.timeout.ms)"),
    ("replica.socket.receive.buffer.bytes", "int", 65536, "SO_RCVBUF of the replica fetchers' connections (klog leaves "
     "it to the OS)", None),
    ("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "how often high watermarks are checkpointed "
     "(klog's follow its recovery points)", None),
    ("replication.quota.window.num", "int", 11, "samples of the replication throttles (klog's are token "
     "buckets)", at_least(1)),
    ("replication.quota.window.size.seconds", "int", 1, "sample span of the replication throttles", at_least(1)),
    ("alter.log.dirs.replication.quota.window.num", "int", 11, "samples of the log dir move throttle", at_least(1)),
    ("alter.log.dirs.replication.quota.window.size.seconds", "int", 1, "sample span of the log dir move "
     "throttle", at_least(1)),
    # purgatories and coordinators (Kafka's threads and buffers)
    ("fetch.purgatory.purge.interval.requests", "int", 1000, "fetch purgatory purge interval", None),
    ("producer.purgatory.purge.interval.requests", "int", 1000, "produce purgatory purge interval", None),
    ("delete.records.purgatory.purge.interval.requests", "int", 1, "DeleteRecords purgatory purge interval", None),
    ("group.coordinator.background.threads", "int", 2, "group coordinator background threads", at_least(1)),
    ("group.coordinator.append.linger.ms", "int", -1, "how long group coordinator writes wait to be batched (-1: "
     "adaptive)", at_least(-1)),
    ("group.coordinator.cached.buffer.max.bytes", "int", 1048588, "buffer the group coordinator keeps for "
     "reuse", at_least(524288)),
    ("add.partitions.to.txn.retry.backoff.ms", "int", 20, "a leader's retry backoff adding a partition to a "
     "transaction", at_least(1)),
    ("add.partitions.to.txn.retry.backoff.max.ms", "int", 100, "a leader's longest wait adding a partition to a "
     "transaction", at_least(0)),
    # the broker's own OAUTHBEARER client login (KIP-1139 jwt-bearer and client_credentials grants)
    ("sasl.oauthbearer.scope", "string", None, "scope of the broker's token request", None),
    ("sasl.oauthbearer.client.credentials.client.id", "string", None, "client id of the broker's client_credentials "
     "grant", None),
    ("sasl.oauthbearer.client.credentials.client.secret", "password", None, "client secret of the broker's "
     "client_credentials grant", None),
    ("sasl.oauthbearer.assertion.algorithm", "string", "RS256", "signing algorithm of the broker's JWT assertion: "
     "ES256 or RS256", one_of("ES256", "RS256", case_insensitive=True)),
    ("sasl.oauthbearer.assertion.claim.aud", "string", None, "aud of the broker's JWT assertion", None),
    ("sasl.oauthbearer.assertion.claim.exp.seconds", "int", 300, "lifetime of the broker's JWT "
     "assertion", in_range(0, 86400)),
    ("sasl.oauthbearer.assertion.claim.iss", "string", None, "iss of the broker's JWT assertion", None),
    ("sasl.oauthbearer.assertion.claim.jti.include", "boolean", False, "a jti in the broker's JWT assertion", None),
    ("sasl.oauthbearer.assertion.claim.nbf.seconds", "int", 60, "nbf of the broker's JWT assertion", in_range(0, 3600)),
    ("sasl.oauthbearer.assertion.claim.sub", "string", None, "sub of the broker's JWT assertion", None),
    ("sasl.oauthbearer.assertion.file", "string", None, "file of a pre-generated JWT assertion", None),
    ("sasl.oauthbearer.assertion.private.key.file", "string", None, "PEM key signing the broker's JWT assertion", None),
    ("sasl.oauthbearer.assertion.private.key.passphrase", "password", None, "passphrase of "
     "sasl.oauthbearer.assertion.private.key.file", None),
    ("sasl.oauthbearer.assertion.template.file", "string", None, "JWT headers and claims template of the broker's "
     "assertion", None),
]

KAFKA_COMPAT_KEYS: dict[str, ConfigKey] = {k.name: k for k in map(_key, _TABLE)}
