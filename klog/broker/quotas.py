"""The broker's client-quota hook (Kafka's ``QuotaManagers``): one question per answered request, "how long must
this client wait?" (:meth:`QuotaControl.produce`, :meth:`QuotaControl.fetch`, :meth:`QuotaControl.request`),
asked by the connection layer once it knows a request's size, its response's size and the time its handler took
(and by the native request path, issue 38).

The quotas are the broker's current metadata image's ClientQuotaRecords (``image.client_quotas``), re-read when
a record changed them; the rates and throttle times are :mod:`klog.security.quotas`'s (Kafka's sampled Rate over
``quota.window.num`` windows of ``quota.window.size.seconds``). A client over its quota gets ``throttle_time_ms``
in its response, sent at once, and its connection reads no further request until that time has passed (KIP-219).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from klog.security.principal import KafkaPrincipal
from klog.security.quotas import QuotaManager

__all__ = ["QuotaControl", "quota_control"]

#: request_percentage is per request handler thread: 100% is one thread busy all the time
_PERCENT_PER_SECOND = 100.0


class QuotaControl:
    """``quotas()``: the client quotas of the image the broker serves now."""

    def __init__(self, quotas: Callable[[], Mapping[Any, Mapping[str, float]]], *, num_samples: int,
                 window_ms: int) -> None:
        self._quotas = quotas
        self._seen: Any = None
        self.produce_quota = QuotaManager("producer_byte_rate", num_samples=num_samples, window_ms=window_ms)
        self.fetch_quota = QuotaManager("consumer_byte_rate", num_samples=num_samples, window_ms=window_ms)
        self.request_quota = QuotaManager("request_percentage", num_samples=num_samples, window_ms=window_ms)
        self.enabled = False
        #: CreateTopics/CreatePartitions/DeleteTopics answers the controller throttled by controller_mutation_rate
        #: (the controller decides, KIP-599; this broker answered them) and their total throttle time, ms
        self.mutations_throttled = 0
        self.mutation_throttle_ms_total = 0

    def refresh(self) -> bool:
        """Take the image's quotas if they changed; whether any quota is set."""
        quotas = self._quotas()
        if quotas is not self._seen:
            self._seen = quotas
            for manager in (self.produce_quota, self.fetch_quota, self.request_quota):
                manager.update_quotas(quotas)
            self.enabled = any(m.enabled for m in (self.produce_quota, self.fetch_quota, self.request_quota))
        return self.enabled

    def produce(self, principal: KafkaPrincipal, client_id: str | None, nbytes: int, now_ms: float) -> int:
        """A produce request of ``nbytes``: its throttle time (ms) by ``producer_byte_rate``."""
        return self.produce_quota.record(principal.name, client_id or "", nbytes, now_ms)

    def limits_fetch(self, principal: KafkaPrincipal, client_id: str | None) -> bool:
        """Whether a ``consumer_byte_rate`` quota applies to the client's fetches."""
        return self.fetch_quota.applies(principal.name, client_id or "")

    def fetch(self, principal: KafkaPrincipal, client_id: str | None, nbytes: int, now_ms: float) -> int:
        """A consumer's fetch response of ``nbytes``: its throttle time by ``consumer_byte_rate``. A throttled
        fetch is answered empty, so its bytes are taken back (Kafka's ``unrecordQuotaSensor``)."""
        throttle = self.fetch_quota.record(principal.name, client_id or "", nbytes, now_ms)
        if throttle:
            self.fetch_quota.record(principal.name, client_id or "", -nbytes, now_ms, judge=False)
        return throttle

    def request(self, principal: KafkaPrincipal, client_id: str | None, handler_s: float, now_ms: float) -> int:
        """``handler_s`` seconds of request handling: its throttle time by ``request_percentage``."""
        return self.request_quota.record(principal.name, client_id or "", handler_s * _PERCENT_PER_SECOND, now_ms)

    def mutation_throttled(self, throttle_ms: int) -> None:
        """A topic mutation answered with the throttle time the controller's mutation quota gave it."""
        if throttle_ms > 0:
            self.mutations_throttled += 1
            self.mutation_throttle_ms_total += throttle_ms

    def throttles(self) -> dict[str, tuple[int, int]]:
        """quota type (Kafka's sensor names: Produce, Fetch, Request, ControllerMutation) -> (throttled requests,
        total ms)."""
        counts = {name: (m.throttled, m.throttle_ms_total) for name, m in
                  (("Produce", self.produce_quota), ("Fetch", self.fetch_quota), ("Request", self.request_quota))}
        counts["ControllerMutation"] = (self.mutations_throttled, self.mutation_throttle_ms_total)
        return counts


def quota_control(config: Mapping[str, Any], quotas: Callable[[], Mapping[Any, Mapping[str, float]]]
                  ) -> QuotaControl:
    return QuotaControl(quotas, num_samples=int(config["quota.window.num"]),
                        window_ms=int(config["quota.window.size.seconds"]) * 1000)
