"""Kafka's sampled Rate, quota precedence and ClientQuotaManager's throttle times (klog.security.quotas),
without sockets or clocks: time is passed in."""

from __future__ import annotations

import pytest

from klog.security.quotas import (
    MutationQuotaManager,
    QuotaManager,
    Rate,
    TokenBucket,
    resolve_quota,
    throttle_time_ms,
)


def test_rate_spans_at_least_num_samples_minus_one_windows():
    rate = Rate(11, 1000, now_ms=0)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000   # 10 full windows assumed
    assert rate.measure(0) == pytest.approx(1000.0)
    rate.record(10_000, 500)
    assert rate.measure(500) == pytest.approx(20_000 * 1000 / 10_500)


def test_rate_forgets_samples_older_than_the_window():
    rate = Rate(3, 1000, now_ms=0)
    rate.record(3000, 0)
    assert rate.measure(0) == pytest.approx(1500.0)
    assert rate.measure(3000) == 0.0   # older than 3 windows: purged


def test_steady_rate_is_measured():
    rate = Rate(11, 1000, now_ms=0)
    for t in range(0, 20_000, 100):   # 1000 bytes per 100 ms: 10 kB/s
        rate.record(1000, t)
    assert rate.measure(19_900) == pytest.approx(10_000, rel=0.1)


def test_throttle_time_brings_the_rate_back_to_the_bound():
    assert throttle_time_ms(100.0, 100.0, 10_000) == 0
    assert throttle_time_ms(150.0, 100.0, 10_000) == 5000
    # 10 kB/s for 20 s against a bound of 5 kB/s: throttled for about as long again
    rate = Rate(21, 1000, now_ms=0)
    for t in range(0, 20_000, 100):
        rate.record(1000, t)
    now = 19_999
    wait = throttle_time_ms(rate.measure(now), 5000.0, rate.window_size_ms(now))
    assert wait == pytest.approx(19_000, rel=0.01)   # 200 kB over 21 s (20 full windows and the current one)


def _quotas(*items):
    out = {}
    for entity, key, value in items:
        out.setdefault(tuple(sorted(entity)), {})[key] = value
    return out


def test_precedence_is_kafkas():
    key = "producer_byte_rate"
    levels = [
        ([("user", "alice"), ("client-id", "app")], ("alice", "app")),
        ([("user", "alice"), ("client-id", None)], ("alice", "app")),
        ([("user", "alice")], ("alice", "")),
        ([("user", None), ("client-id", "app")], ("alice", "app")),
        ([("user", None), ("client-id", None)], ("alice", "app")),
        ([("user", None)], ("alice", "")),
        ([("client-id", "app")], ("", "app")),
        ([("client-id", None)], ("", "app")),
    ]
    items = [(entity, key, float(i + 1)) for i, (entity, _) in enumerate(levels)]
    for i, (_, metric) in enumerate(levels):
        assert resolve_quota(_quotas(*items[i:]), key, "alice", "app") == (float(i + 1), metric)
    assert resolve_quota({}, key, "alice", "app")[0] is None
    # another key, another user: not matched
    assert resolve_quota(_quotas(([("user", "bob")], key, 5.0)), key, "alice", "app")[0] is None
    assert resolve_quota(_quotas(([("user", "alice")], "consumer_byte_rate", 5.0)), key, "alice", "app")[0] is None


def test_manager_throttles_only_clients_over_their_quota():
    manager = QuotaManager("producer_byte_rate", num_samples=11, window_ms=1000)
    assert manager.record("alice", "app", 1e9, 0) == 0   # no quota at all: not even measured
    manager.update_quotas(_quotas(([("user", "alice")], "producer_byte_rate", 1000.0)))
    throttles = [manager.record("alice", "app", 2000, t) for t in range(0, 10_000, 1000)]   # 2 kB/s
    # 2000 B over the 10 s minimum window: 200 B/s, within; from 6 s on the sum is over 1000 B/s
    assert throttles[:5] == [0] * 5 and all(throttles[5:])
    assert throttles[5] == 2000   # 12 kB over 10 s: 20% over the bound, 20% of the window
    assert manager.throttled == 5 and manager.throttle_ms_total == sum(throttles)
    assert manager.record("bob", "app", 10 ** 9, 10_000) == 0   # no quota for bob
    # the user's quota is shared by all of alice's client ids
    assert manager.record("alice", "other", 1, 10_000) > 0


def test_idle_rates_expire_and_the_count_is_bounded():
    manager = QuotaManager("consumer_byte_rate", idle_ms=1000, max_entities=4)
    manager.update_quotas(_quotas(([("client-id", None)], "consumer_byte_rate", 10.0)))
    for i in range(10):
        manager.record("u", f"c{i}", 1, i * 10)
    assert len(manager._rates) <= 4
    manager.expire(10_000)
    assert not manager._rates


def test_broker_hook_follows_the_image_and_counts_throttles():
    from klog.broker.quotas import quota_control
    from klog.security.principal import KafkaPrincipal

    image = {"quotas": {}}
    control = quota_control({"quota.window.num": 2, "quota.window.size.seconds": 1}, lambda: image["quotas"])
    alice = KafkaPrincipal("User", "alice")
    assert control.refresh() is False   # no quota: the connection layer skips the hook entirely
    image["quotas"] = _quotas(([("user", "alice")], "producer_byte_rate", 1000.0),
                              ([("client-id", None)], "consumer_byte_rate", 1000.0),
                              ([("user", None)], "request_percentage", 10.0))
    assert control.refresh() is True
    assert control.produce(alice, "app", 5000, 0) > 0          # 5000 B over a 1 s minimum window: 5x
    assert control.produce(KafkaPrincipal("User", "bob"), "app", 5000, 0) == 0   # bob has no produce quota
    assert control.fetch(alice, None, 500, 0) == 0 and control.fetch(alice, None, 5000, 0) > 0
    assert control.request(alice, "app", 0.05, 0) == 0           # 5% of a thread
    assert control.request(alice, "app", 0.2, 0) > 0             # then 25%: over 10%
    control.mutation_throttled(0)      # a topic mutation within the controller's mutation quota
    control.mutation_throttled(1500)   # one the controller throttled for 1.5 s
    assert {k: v[0] for k, v in control.throttles().items()} == {"Produce": 1, "Fetch": 1, "Request": 1,
                                                                  "ControllerMutation": 1}
    assert control.throttles()["ControllerMutation"] == (1, 1500)
    image["quotas"] = {}
    assert control.refresh() is False and control.produce(alice, "app", 10 ** 9, 1) == 0


_MUTATION = {(("client-id", "c"),): {"controller_mutation_rate": 5.0}}


def test_strict_mutation_quota_lets_one_request_overdraw_then_refuses_until_refilled():
    manager = MutationQuotaManager(num_samples=2, window_ms=1000)   # a full bucket holds 10 at 5/s
    quota = manager.quota_for(_MUTATION, "ANONYMOUS", "c", True, 0)
    assert quota.record(15, 0)   # the bucket was not negative: taken, now -5
    assert quota.throttle_time_ms(0) == 0   # an accepted strict request is not throttled (as on Kafka)
    assert not quota.record(1, 0)   # refused: 1 s until the bucket is back at 0
    assert quota.throttle_time_ms(0) == 1000
    assert quota.throttle_time_ms(400) == 600
    later = manager.quota_for(_MUTATION, "ANONYMOUS", "c", True, 999)
    assert not later.record(1, 999)
    assert later.record(1, 1000)   # refilled to 0: accepted


def test_permissive_mutation_quota_accepts_and_reports_the_overdraft():
    manager = MutationQuotaManager(num_samples=2, window_ms=1000)
    quota = manager.quota_for(_MUTATION, "ANONYMOUS", "c", False, 0)
    assert quota.record(15, 0) and quota.throttle_time_ms(0) == 1000
    assert quota.record(5, 0) and quota.throttle_time_ms(0) == 2000


def test_mutations_without_a_quota_are_not_counted():
    manager = MutationQuotaManager(num_samples=2, window_ms=1000)
    quota = manager.quota_for(_MUTATION, "ANONYMOUS", "other", True, 0)
    assert all(quota.record(1000, 0) for _ in range(3)) and quota.throttle_time_ms(0) == 0


def test_token_bucket_refills_at_the_rate_up_to_its_burst():
    bucket = TokenBucket(10.0, 0)
    assert bucket.take(5.0, 10.0, 12, 0) == -2
    assert bucket.refill(5.0, 10.0, 1000) == pytest.approx(3.0)
    assert bucket.refill(5.0, 10.0, 60_000) == 10.0
