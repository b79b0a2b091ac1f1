"""Client configuration with Kafka's names.

Every key is accepted in Kafka's dotted form (``linger.ms``) and as a Python keyword with underscores
(``linger_ms``). Values may be given typed (``5``, ``True``) or as strings as in a properties file (``"5"``,
``"true"``). Unknown keys and invalid values raise :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = [
    "ConfigDef",
    "COMMON_CONFIG",
    "PRODUCER_CONFIG",
    "CONSUMER_CONFIG",
    "ADMIN_CONFIG",
    "resolve_config",
    "normalize_key",
]


def normalize_key(key: str) -> str:
    """``linger_ms`` -> ``linger.ms`` (Kafka config names contain no underscores)."""
    return key.replace("_", ".")


def _to_int(key: str, v: Any) -> int:
    if isinstance(v, bool):
        raise ConfigError(f"{key} must be an integer, not {v!r}")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be an integer, not {v!r}") from None


def _to_bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise ConfigError(f"{key} must be a boolean (true/false), not {v!r}")


def _to_str(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{key} must be a string, not {v!r}")
    return v


def _to_list(key: str, v: Any) -> list[str]:
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    if isinstance(v, Iterable):
        out = []
        for item in v:
            if not isinstance(item, str):
                raise ConfigError(f"{key} must be a list of strings, not {v!r}")
            out.append(item)
        return out
    raise ConfigError(f"{key} must be a comma-separated string or a list of strings, not {v!r}")


@dataclass(frozen=True)
class ConfigDef:
    """One configuration key: its Kafka name, default, converter and an optional range/choice check."""

    name: str
    default: Any
    kind: str  # int | bool | str | list | choice | acks | any
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()

    def convert(self, value: Any) -> Any:
        if value is None:
            if self.default is None:
                return None
            raise ConfigError(f"{self.name} must not be None")
        k = self.kind
        if k == "int":
            out: Any = _to_int(self.name, value)
            if self.minimum is not None and out < self.minimum:
                raise ConfigError(f"{self.name} must be >= {self.minimum}, not {out}")
            if self.maximum is not None and out > self.maximum:
                raise ConfigError(f"{self.name} must be <= {self.maximum}, not {out}")
            return out
        if k == "bool":
            return _to_bool(self.name, value)
        if k == "str":
            return _to_str(self.name, value)
        if k == "list":
            return _to_list(self.name, value)
        if k == "choice":
            s = _to_str(self.name, value).strip().lower()
            if s not in self.choices:
                raise ConfigError(f"{self.name} must be one of {', '.join(self.choices)}, not {value!r}")
            return s
        if k == "acks":
            if isinstance(value, str) and value.strip().lower() == "all":
                return -1
            n = _to_int(self.name, value)
            if n not in (-1, 0, 1):
                raise ConfigError(f"acks must be 0, 1, -1 or 'all', not {value!r}")
            return n
        return value


def _d(name: str, default: Any, kind: str, doc: str, **kw: Any) -> ConfigDef:
    return ConfigDef(name, default, kind, doc, **kw)


_INT32_MAX = 2**31 - 1

COMMON_CONFIG: tuple[ConfigDef, ...] = (
    _d("bootstrap.servers", None, "list", "host:port pairs used to discover the cluster"),
    _d("client.id", "klog-python", "str", "client id sent with every request"),
    _d("request.timeout.ms", 30000, "int", "how long to wait for a response before failing the request",
       minimum=1),
    _d("metadata.max.age.ms", 300000, "int", "refresh cluster metadata at least this often", minimum=0),
    _d("reconnect.backoff.ms", 50, "int", "initial wait before reconnecting to a broker", minimum=0),
    _d("reconnect.backoff.max.ms", 1000, "int", "maximum wait before reconnecting to a broker", minimum=0),
    _d("retry.backoff.ms", 100, "int", "initial wait before retrying a failed request", minimum=0),
    _d("retry.backoff.max.ms", 1000, "int", "maximum wait before retrying a failed request", minimum=0),
    _d("socket.connection.setup.timeout.ms", 10000, "int", "timeout for establishing a connection", minimum=1),
    _d("connections.max.idle.ms", 540000, "int", "close idle connections after this long", minimum=-1),
    _d("max.response.bytes", 256 * 1024 * 1024, "int",
       "largest response frame accepted from a broker (protects the client's memory)", minimum=1024),
    _d("security.protocol", "plaintext", "choice", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
       choices=("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")),
    _d("sasl.mechanism", None, "str", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    _d("sasl.mechanisms", None, "str", "librdkafka's name of sasl.mechanism"),
    _d("sasl.username", None, "str", "the SASL user"),
    _d("sasl.password", None, "str", "the SASL user's password"),
    _d("sasl.jaas.config", None, "str", "the Java client's login: a PlainLoginModule or ScramLoginModule with "
       "username and password"),
    _d("ssl.ca.location", None, "str", "PEM file of the CAs the brokers' certificates are checked against "
       "(default: the system's)"),
    _d("ssl.ca.pem", None, "str", "the CA certificates in PEM, inline"),
    _d("ssl.certificate.location", None, "str", "the client certificate (PEM) for mTLS"),
    _d("ssl.certificate.pem", None, "str", "the client certificate in PEM, inline"),
    _d("ssl.key.location", None, "str", "the client certificate's private key (PEM)"),
    _d("ssl.key.pem", None, "str", "the private key in PEM, inline"),
    _d("ssl.key.password", None, "str", "password of an encrypted private key"),
    _d("ssl.endpoint.identification.algorithm", "https", "str", "https: check the broker's host name against its "
       "certificate; none or empty: do not"),
    _d("ssl.cipher.suites", None, "list", "TLS 1.2 cipher suites (OpenSSL's or IANA names)"),
    _d("ssl.enabled.protocols", None, "list", "TLSv1.2, TLSv1.3"),
    _d("ssl.truststore.location", None, "str", "the Java client's truststore (PEM or PKCS12)"),
    _d("ssl.truststore.type", None, "str", "PEM or PKCS12"),
    _d("ssl.truststore.password", None, "str", "password of a PKCS12 truststore"),
    _d("ssl.truststore.certificates", None, "str", "trusted certificates in PEM, inline"),
    _d("ssl.keystore.location", None, "str", "the Java client's keystore (PEM or PKCS12) for mTLS"),
    _d("ssl.keystore.type", None, "str", "PEM or PKCS12"),
    _d("ssl.keystore.password", None, "str", "password of a PKCS12 keystore"),
    _d("ssl.keystore.key", None, "str", "the private key in PEM, inline"),
    _d("ssl.keystore.certificate.chain", None, "str", "the certificate chain in PEM, inline"),
    _d("client.rack", "", "str", "rack id sent with fetch requests"),
)

PRODUCER_CONFIG: tuple[ConfigDef, ...] = COMMON_CONFIG + (
    _d("acks", -1, "acks", "0 (no response), 1 (leader) or all/-1 (all in-sync replicas)"),
    _d("linger.ms", 5, "int", "wait up to this long for more records before sending a batch", minimum=0),
    _d("batch.size", 1000000, "int", "target size in bytes of one partition's batch", minimum=1),
    _d("buffer.memory", 33554432, "int", "bytes of unsent records the producer may buffer", minimum=1),
    _d("max.block.ms", 60000, "int", "how long send() may block when the buffer is full or metadata is missing",
       minimum=0),
    _d("max.request.size", 1048576, "int", "largest produce request (and so the largest record)", minimum=1),
    _d("compression.type", "none", "choice", "codec of produced batches",
       choices=("none", "gzip", "snappy", "lz4", "zstd")),
    _d("compression.level", None, "int", "codec level (codec default when unset)"),
    _d("retries", _INT32_MAX, "int", "how many times a failed batch is retried", minimum=0),
    _d("delivery.timeout.ms", 120000, "int", "upper bound on the time to report success or failure of a send",
       minimum=1),
    _d("enable.idempotence", True, "bool", "exactly-once per partition: retries never duplicate records"),
    _d("max.in.flight.requests.per.connection", 5, "int", "unacknowledged produce requests per broker",
       minimum=1),
    _d("partitioner", "murmur2_random", "choice",
       "keyed records: murmur2 (Java's default); null keys: sticky partitioning",
       choices=("murmur2_random", "murmur2", "random")),
    _d("partitioner.ignore.keys", False, "bool", "use sticky partitioning even for keyed records"),
    _d("allow.auto.create.topics", True, "bool", "let metadata requests create missing topics"),
    _d("transactional.id", None, "str", "makes the producer transactional (init_transactions, begin_transaction, "
       "commit_transaction ...); one live producer per id: a new one fences the old"),
    _d("transaction.timeout.ms", 60000, "int", "the coordinator aborts a transaction open longer than this",
       minimum=1),
)

CONSUMER_CONFIG: tuple[ConfigDef, ...] = COMMON_CONFIG + (
    _d("group.id", None, "str", "consumer group; None for manual assignment without commits"),
    _d("group.instance.id", None, "str", "static membership id"),
    _d("group.protocol", "classic", "choice",
       "classic (JoinGroup/SyncGroup) or consumer (KIP-848, used when the broker offers it)",
       choices=("classic", "consumer")),
    _d("group.remote.assignor", None, "str", "server-side assignor for group.protocol=consumer"),
    _d("auto.offset.reset", "latest", "choice", "where to start without a committed offset",
       choices=("latest", "earliest", "none")),
    _d("enable.auto.commit", True, "bool", "commit consumed offsets in the background"),
    _d("auto.commit.interval.ms", 5000, "int", "auto-commit period", minimum=0),
    _d("fetch.min.bytes", 1, "int", "the broker waits for this many bytes (or fetch.max.wait.ms)", minimum=0),
    _d("fetch.max.bytes", 52428800, "int", "largest fetch response", minimum=0),
    _d("fetch.max.wait.ms", 500, "int", "longest the broker holds a fetch waiting for data", minimum=0),
    _d("max.partition.fetch.bytes", 1048576, "int", "largest amount fetched per partition", minimum=0),
    _d("max.poll.records", 500, "int", "records returned by one poll()", minimum=1),
    _d("max.poll.interval.ms", 300000, "int", "longest time between polls before leaving the group", minimum=1),
    _d("session.timeout.ms", 45000, "int", "group session timeout", minimum=1),
    _d("heartbeat.interval.ms", 3000, "int", "group heartbeat period", minimum=1),
    _d("partition.assignment.strategy", ["range", "cooperative-sticky"], "list",
       "classic-protocol assignors in preference order: range, roundrobin, sticky, cooperative-sticky"),
    _d("isolation.level", "read_uncommitted", "choice", "read_committed hides aborted and open transactions",
       choices=("read_uncommitted", "read_committed")),
    _d("check.crcs", True, "bool", "verify the CRC of fetched batches"),
    _d("exclude.internal.topics", True, "bool", "pattern subscriptions skip internal topics"),
    _d("allow.auto.create.topics", False, "bool", "let metadata requests create subscribed topics"),
    _d("default.api.timeout.ms", 60000, "int", "timeout of blocking calls without an explicit timeout",
       minimum=0),
    _d("fetch.buffer.bytes", 104857600, "int",
       "prefetched bytes kept ready for poll() before the consumer stops issuing fetches", minimum=1),
)

ADMIN_CONFIG: tuple[ConfigDef, ...] = COMMON_CONFIG + (
    _d("default.api.timeout.ms", 60000, "int", "timeout of admin calls without an explicit timeout", minimum=0),
)


def resolve_config(
    defs: tuple[ConfigDef, ...],
    supplied: Mapping[str, Any],
    *,
    kind: str,
) -> dict[str, Any]:
    """Merge ``supplied`` (dotted or underscored keys) over the defaults of ``defs``.

    Returns a dict keyed by Kafka's dotted names. Unknown keys raise :class:`ConfigError` with a suggestion.
    """
    by_name = {d.name: d for d in defs}
    out = {d.name: d.default for d in defs}
    seen: dict[str, str] = {}
    for raw_key, value in supplied.items():
        key = normalize_key(raw_key)
        d = by_name.get(key)
        if d is None:
            close = difflib.get_close_matches(key, by_name, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown {kind} config {raw_key!r}{hint}")
        if key in seen and seen[key] != raw_key:
            raise ConfigError(f"{kind} config {key!r} given twice (as {seen[key]!r} and {raw_key!r})")
        seen[key] = raw_key
        out[key] = d.convert(value)
    if not out.get("bootstrap.servers"):
        raise ConfigError("bootstrap.servers is required (e.g. bootstrap_servers='127.0.0.1:9092')")
    return out


def parse_bootstrap(servers: list[str]) -> list[tuple[str, int]]:
    """``["host:9092", "[::1]:9093"]`` -> ``[("host", 9092), ("::1", 9093)]``."""
    out = []
    for s in servers:
        s = s.strip()
        if "://" in s:
            s = s.split("://", 1)[1]
        if s.startswith("["):
            host, _, rest = s[1:].partition("]")
            port_s = rest.lstrip(":")
        else:
            host, sep, port_s = s.rpartition(":")
            if not sep:
                host, port_s = s, "9092"
        try:
            port = int(port_s)
        except ValueError:
            raise ConfigError(f"bootstrap.servers entry {s!r} has no valid port") from None
        if not host or not 0 < port < 65536:
            raise ConfigError(f"bootstrap.servers entry {s!r} is not host:port")
        out.append((host, port))
    return out


Callback = Callable[..., Any]
