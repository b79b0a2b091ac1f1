"""Client quotas as Kafka defines them. Pure: no IO, no clock (every call takes ``now_ms``).

- which quota keys each entity combination takes and which values are valid (``QuotaConfig``,
  ``ClientQuotaControlManager``'s validation);
- :class:`Rate`: Kafka's sampled ``Rate`` (a windowed sum over ``quota.window.num`` samples of
  ``quota.window.size.seconds`` each, divided by the window the samples span);
- :func:`resolve_quota`: which quota applies to a (user, client id), in Kafka's precedence (KIP-55), and the
  entity whose clients share it;
- :class:`QuotaManager`: Kafka's ``ClientQuotaManager`` for one quota key: records a value for a (user, client
  id) and answers the throttle time (0 within the quota);
- :class:`MutationQuotaManager`: Kafka's ``ControllerMutationQuotaManager`` (KIP-599): ``controller_mutation_rate``
  as a :class:`TokenBucket` per (user, client id), and each request's :class:`MutationQuota` (strict: a mutation
  is refused while the bucket is negative; permissive, for old request versions: accepted, only throttled).

Entities are Kafka's ``ClientQuotaEntity``: a mapping of entity type (``user``, ``client-id``, ``ip``) to a name,
None being the default entity of that type (``--entity-default``).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Container, Iterable, Mapping
from typing import Any

__all__ = ["CLIENT_ID", "DEFAULT_WINDOW_NUM", "DEFAULT_WINDOW_SIZE_MS", "IP", "IP_QUOTA_KEYS",
           "USER", "USER_CLIENT_QUOTA_KEYS", "MutationQuota", "MutationQuotaManager", "QuotaManager", "Rate",
           "TokenBucket", "quota_keys", "resolve_quota",
           "ip_entity_host_names", "is_ip_literal", "java_hash_map_order", "validate_entity", "validate_value"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"

#: the quota keys of a user, a client id or both, with Kafka's config type (QuotaConfig.userAndClientQuotaConfigs)
USER_CLIENT_QUOTA_KEYS: Mapping[str, str] = {
    "producer_byte_rate": "long",
    "consumer_byte_rate": "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
#: the quota keys of an IP (QuotaConfig.ipConfigs)
IP_QUOTA_KEYS: Mapping[str, str] = {"connection_creation_rate": "int"}

_MAX = {"short": 2 ** 15 - 1, "int": 2 ** 31 - 1, "long": 2 ** 63 - 1}


def validate_entity(entity: Mapping[str, str | None], resolvable_hosts: Container[str] = frozenset()
                    ) -> str | None:
    """Kafka's ClientQuotaControlManager.validateEntity, then its IP check: an error message (INVALID_REQUEST),
    or None. ``entity`` in Kafka's map order (:func:`java_hash_map_order`): the first type it does not handle or
    empty name in that order is the one named. ``resolvable_hosts``: the IP entities' host names that resolved
    (Kafka's ``InetAddress.getByName``), looked up by the caller before the decision, which does no IO."""
    if not entity:
        return "Invalid empty client quota entity"
    for entity_type, name in entity.items():
        if entity_type not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and name == "":
            return f"Empty {entity_type} not supported"
    name = entity.get(IP)
    if name is not None and not is_ip_literal(name) and name not in resolvable_hosts:
        return f"{name} is not a valid IP or resolvable host."
    return None


def is_ip_literal(name: str) -> bool:
    """An IPv4 or IPv6 address written out (no name to resolve)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def ip_entity_host_names(entities: Iterable[Mapping[str, str | None]]) -> set[str]:
    """The IP entities' names that are neither an address nor the default entity nor empty: the host names
    :func:`validate_entity` needs resolved."""
    return {name for entity in entities if (name := entity.get(IP)) and not is_ip_literal(name)}


def java_hash_map_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """``keys`` in the iteration order of a Java ``HashMap(initial_capacity)`` they were put in (bucket by
    String.hashCode spread, then insertion order): the order of Kafka's answers and checks built from such a
    map (AlterClientQuotasRequest.entries() sizes its entity maps by the request's entity list)."""
    items = list(dict.fromkeys(keys))
    capacity = 1
    while capacity < initial_capacity:
        capacity *= 2
    for size in range(1, len(items) + 1):   # HashMap.putVal: resize once the size passes 3/4 of the table
        if size > int(capacity * 0.75):
            capacity *= 2

    def bucket(key: str) -> int:
        h = 0
        units = key.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(items, key=bucket)   # stable: insertion order within a bucket


def quota_keys(entity: Mapping[str, str | None]) -> tuple[Mapping[str, str] | None, str | None]:
    """(the quota keys the entity combination takes, None) or (None, the error: INVALID_REQUEST)."""
    has_user, has_client, has_ip = USER in entity, CLIENT_ID in entity, IP in entity
    if has_ip:
        if has_user or has_client:
            return None, ("Invalid quota entity combination, IP entity shouldnot be combined with "   # sic, Kafka's
                          "User or ClientId")
        return IP_QUOTA_KEYS, None
    if has_user or has_client:
        return USER_CLIENT_QUOTA_KEYS, None
    return None, "Invalid empty client quota entity"


def validate_value(keys: Mapping[str, str], key: str, value: float) -> str | None:
    """Kafka's validateQuotaKeyValue: an error message (INVALID_REQUEST), or None."""
    config_type = keys.get(key)
    if config_type is None:
        return f"Invalid configuration key {key}"
    if value != value or value <= 0.0:   # NaN too
        return f"Quota {key} must be greater than 0"
    if config_type == "double":
        return None
    if value > float(_MAX[config_type]):   # as Kafka's: compared as doubles (2^63 - 1 is 2^63)
        return f"Proposed value for {key} is too large for a {config_type.upper()}."
    if abs(value % 1.0) > 1e-10:
        return f"{key} cannot be a fractional value."
    return None


# ---- enforcement (Kafka's ClientQuotaManager) ---------------------------------------------------------------

#: Kafka's ``quota.window.num`` and ``quota.window.size.seconds`` defaults
DEFAULT_WINDOW_NUM = 11
DEFAULT_WINDOW_SIZE_MS = 1000


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat`` (a windowed sum) of ``num_samples`` samples of ``window_ms``, plus
    the one overlapping the start of the monitored span (Kafka 4's SampledStat keeps ``samples + 1``): a value
    per second. A value arriving ``window_ms`` or more after its sample started starts the next sample; a sample
    whose last value is ``num_samples * window_ms`` old is reset; the rate divides the samples' sum by the time
    since the oldest one started, at least ``num_samples - 1`` full windows (so a first burst is not a huge
    rate)."""

    __slots__ = ("num_samples", "window_ms", "_starts", "_last", "_values", "_current")

    def __init__(self, num_samples: int = DEFAULT_WINDOW_NUM, window_ms: int = DEFAULT_WINDOW_SIZE_MS,
                 now_ms: float = 0.0) -> None:
        if num_samples < 1 or window_ms <= 0:
            raise ValueError("a rate needs at least 1 sample of a positive window")
        self.num_samples = num_samples
        self.window_ms = window_ms
        self._starts = [now_ms]   # grows to num_samples + 1 as samples are started, as Kafka's list
        self._last = [now_ms]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:   # the current sample is complete: the next one
            i = self._current = (i + 1) % (self.num_samples + 1)
            if i >= len(self._starts):
                self._starts.append(now_ms)
                self._last.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[i] = now_ms
                self._values[i] = 0.0
        self._values[i] += value
        self._last[i] = now_ms

    def _purge(self, now_ms: float) -> None:
        expire = self.num_samples * self.window_ms
        for i in range(len(self._starts)):
            if now_ms - self._last[i] >= expire:
                self._starts[i] = self._last[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """Kafka's Rate.windowSize: the span the samples cover, at least ``num_samples - 1`` windows."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = int(elapsed // self.window_ms)
        if full < self.num_samples - 1:
            elapsed += (self.num_samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """The rate per second now."""
        window = self.window_size_ms(now_ms)
        return sum(self._values) * 1000.0 / window


#: the quota entities of Kafka's precedence, most specific first (user, client id): a name is the request's,
#: None the default entity, ``_ANY`` that the entity has no such part
_ANY = object()


def resolve_quota(quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]], key: str,
                  user: str, client_id: str) -> tuple[float | None, tuple[str, str]]:
    """(the ``key`` quota of ``user`` with ``client_id``, the metric entity (user, client id) whose requests
    share it: "" for a part that is not in the quota's entity) in Kafka's precedence (KIP-55): user and client
    id, user and default client id, user, default user and client id, default user and default client id,
    default user, client id, default client id. (None, ...) when none applies."""
    candidates = (
        ((("client-id", client_id), ("user", user)), (user, client_id)),
        ((("client-id", None), ("user", user)), (user, client_id)),
        ((("user", user),), (user, "")),
        ((("client-id", client_id), ("user", None)), (user, client_id)),
        ((("client-id", None), ("user", None)), (user, client_id)),
        ((("user", None),), (user, "")),
        ((("client-id", client_id),), ("", client_id)),
        ((("client-id", None),), ("", client_id)),
    )
    for entity, metric in candidates:
        values = quotas.get(entity)
        if values is not None:
            value = values.get(key)
            if value is not None:
                return value, metric
    return None, (user, client_id)


def throttle_time_ms(value: float, bound: float, window_ms: float) -> int:
    """Kafka's QuotaUtils.throttleTime: how long the client must wait for its rate to fall to the bound."""
    if value <= bound or bound <= 0:
        return 0
    return int(math.floor((value - bound) / bound * window_ms + 0.5))


class QuotaManager:
    """One quota key's enforcement (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``):
    a :class:`Rate` per metric entity, created on first use and dropped after ``idle_ms`` without use (Kafka's
    sensors expire after an hour)."""

    def __init__(self, key: str, *, num_samples: int = DEFAULT_WINDOW_NUM,
                 window_ms: int = DEFAULT_WINDOW_SIZE_MS, idle_ms: int = 3_600_000,
                 max_entities: int = 100_000) -> None:
        self.key = key
        self.num_samples = num_samples
        self.window_ms = window_ms
        self.idle_ms = idle_ms
        #: an explicit bound on the rates kept (one per user/client id seen with a quota)
        self.max_entities = max_entities
        self._rates: dict[tuple[str, str], tuple[Rate, float]] = {}
        self._quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = {}
        #: whether any entity has this key (else recording is skipped at once)
        self.enabled = False
        #: requests throttled and their total throttle time since start (the metrics)
        self.throttled = 0
        self.throttle_ms_total = 0

    def update_quotas(self, quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]]) -> None:
        """The image's client quotas changed."""
        self._quotas = quotas
        self.enabled = any(self.key in values for values in quotas.values())

    def applies(self, user: str, client_id: str) -> bool:
        """Whether the client has a quota of this key."""
        return self.enabled and resolve_quota(self._quotas, self.key, user, client_id)[0] is not None

    def record(self, user: str, client_id: str, value: float, now_ms: float, *, judge: bool = True) -> int:
        """Record ``value`` for the client; the throttle time in ms its request earns (0: within its quota).
        ``judge=False``: record only (a negative value takes back what a request no longer uses), 0."""
        if not self.enabled:
            return 0
        bound, metric = resolve_quota(self._quotas, self.key, user, client_id)
        if bound is None:
            return 0
        entry = self._rates.get(metric)
        if entry is None:
            if len(self._rates) >= self.max_entities:
                self.expire(now_ms)
            rate = Rate(self.num_samples, self.window_ms, now_ms)
        else:
            rate = entry[0]
        self._rates[metric] = (rate, now_ms)
        rate.record(value, now_ms)
        if not judge:
            return 0
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle = throttle_time_ms(measured, bound, rate.window_size_ms(now_ms))
        if throttle > 0:
            self.throttled += 1
            self.throttle_ms_total += throttle
        return throttle

    def rate(self, user: str, client_id: str, now_ms: float) -> float | None:
        """The measured rate of the client's metric entity (None: no quota applies)."""
        bound, metric = resolve_quota(self._quotas, self.key, user, client_id)
        entry = self._rates.get(metric)
        return None if bound is None or entry is None else entry[0].measure(now_ms)

    def expire(self, now_ms: float) -> None:
        """Drop the rates unused for ``idle_ms`` (or the oldest half when still at the bound)."""
        self._rates = _unexpired(self._rates, now_ms, self.idle_ms, self.max_entities)


def _unexpired(entries: dict[tuple[str, str], tuple[Any, float]], now_ms: float, idle_ms: int, bound: int
               ) -> dict[tuple[str, str], tuple[Any, float]]:
    """``entries`` (value, last use) without those unused for ``idle_ms``, and without the older half when still
    ``bound`` or more."""
    kept = {k: v for k, v in entries.items() if now_ms - v[1] < idle_ms}
    if len(kept) >= bound:
        kept = dict(sorted(kept.items(), key=lambda kv: kv[1][1])[len(kept) // 2:])
    return kept


# ---- controller mutations (Kafka's ControllerMutationQuotaManager, KIP-599) --------------------------------------

MUTATION_RATE = "controller_mutation_rate"


class TokenBucket:
    """Kafka's ``TokenBucket`` stat: ``tokens`` refill at the quota per second up to a burst of
    ``controller.quota.window.num * controller.quota.window.size.seconds`` seconds' worth (as measured on Kafka 4);
    a mutation takes its partitions even when that leaves the bucket negative (one large request overdraws it). A new bucket is full, as Kafka's."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self, burst: float, now_ms: float) -> None:
        self.tokens = burst
        self.last_ms = now_ms

    def refill(self, rate: float, burst: float, now_ms: float) -> float:
        """The tokens now (``rate`` per second since the last update, at most ``burst``)."""
        elapsed = max(0.0, now_ms - self.last_ms)
        self.tokens = min(burst, self.tokens + rate * elapsed / 1000.0)
        self.last_ms = max(self.last_ms, now_ms)
        return self.tokens

    def take(self, rate: float, burst: float, permits: float, now_ms: float) -> float:
        """Take ``permits``; the tokens left (negative: overdrawn)."""
        self.tokens = self.refill(rate, burst, now_ms) - permits
        return self.tokens


def _bucket_throttle_ms(tokens: float, rate: float) -> int:
    """Kafka's ControllerMutationQuotaManager.throttleTimeMs: how long until an overdrawn bucket is back at 0."""
    return round(-tokens / rate * 1000.0) if tokens < 0 else 0


class MutationQuota:
    """One request's controller mutation quota (Kafka's ``StrictControllerMutationQuota`` or
    ``PermissiveControllerMutationQuota``; without a quota nothing is recorded, Kafka's unbounded quota)."""

    __slots__ = ("_bucket", "_rate", "_burst", "strict", "_throttle_ms", "_throttled_at_ms")

    def __init__(self, bucket: TokenBucket | None, rate: float, burst: float, strict: bool) -> None:
        self._bucket = bucket
        self._rate = rate
        self._burst = burst
        self.strict = strict
        self._throttle_ms = 0
        self._throttled_at_ms = 0.0

    def record(self, permits: int, now_ms: float) -> bool:
        """Charge ``permits`` partition mutations: False when refused (strict, and the bucket is negative before
        them: THROTTLING_QUOTA_EXCEEDED, nothing taken), else True (taken, even past the bucket's end)."""
        bucket = self._bucket
        if bucket is None:
            return True
        if self.strict:
            tokens = bucket.refill(self._rate, self._burst, now_ms)
            if tokens < 0:
                self._throttled(tokens, now_ms)
                return False
            bucket.take(self._rate, self._burst, permits, now_ms)
            return True
        tokens = bucket.take(self._rate, self._burst, permits, now_ms)
        if tokens < 0:
            self._throttled(tokens, now_ms)
        return True

    def _throttled(self, tokens: float, now_ms: float) -> None:
        self._throttle_ms = _bucket_throttle_ms(tokens, self._rate)
        self._throttled_at_ms = now_ms

    def throttle_time_ms(self, now_ms: float) -> int:
        """The response's throttle time: what is left of the last refusal's (or overdraft's) wait."""
        return max(0, int(self._throttle_ms - (now_ms - self._throttled_at_ms))) if self._throttle_ms else 0


class MutationQuotaManager:
    """``controller_mutation_rate`` enforcement: a :class:`TokenBucket` per metric entity (Kafka's precedence of
    :func:`resolve_quota`), created full on first use and dropped after ``idle_ms`` unused."""

    def __init__(self, *, num_samples: int = DEFAULT_WINDOW_NUM, window_ms: int = DEFAULT_WINDOW_SIZE_MS,
                 idle_ms: int = 3_600_000, max_entities: int = 100_000) -> None:
        self.num_samples = num_samples
        self.window_ms = window_ms
        self.idle_ms = idle_ms
        self.max_entities = max_entities
        self._buckets: dict[tuple[str, str], tuple[TokenBucket, float]] = {}

    def quota_for(self, quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]], user: str,
                  client_id: str, strict: bool, now_ms: float) -> MutationQuota:
        """The quota of one request of ``user`` with ``client_id`` (``strict``: a version that may be refused)."""
        rate, metric = resolve_quota(quotas, MUTATION_RATE, user, client_id)
        if rate is None or rate <= 0:
            return MutationQuota(None, 0.0, 0.0, strict)
        burst = self.num_samples * self.window_ms / 1000.0 * rate
        entry = self._buckets.get(metric)
        if entry is None:
            if len(self._buckets) >= self.max_entities:
                self._expire(now_ms)
            bucket = TokenBucket(burst, now_ms)
        else:
            bucket = entry[0]
        self._buckets[metric] = (bucket, now_ms)
        return MutationQuota(bucket, rate, burst, strict)

    def _expire(self, now_ms: float) -> None:
        self._buckets = _unexpired(self._buckets, now_ms, self.idle_ms, self.max_entities)
