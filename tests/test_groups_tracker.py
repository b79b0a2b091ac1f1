"""The native session tracker behind heartbeat/session expiry (klog._native.SessionTracker)."""

import random

import pytest

from klog._native import SessionTracker


def test_expired_returns_due_keys_in_deadline_order_once():
    t = SessionTracker()
    t.schedule(1, 300)
    t.schedule(2, 100)
    t.schedule(3, 200)
    assert t.expired(99) == []
    assert t.expired(250) == [2, 3]
    assert t.expired(250) == []
    assert len(t) == 1 and 1 in t and 2 not in t
    assert t.next_deadline() == 300


def test_heartbeat_extension_postpones_expiry():
    t = SessionTracker()
    t.schedule(42, 1_000)
    for now in range(0, 5_000, 100):
        assert t.expired(now) == []
        t.schedule(42, now + 1_000)  # a heartbeat every 100 ms with a 1 s session
    assert t.deadline(42) == 5_900
    assert t.expired(5_899) == []
    assert t.expired(5_900) == [42]


def test_cancel_and_clear():
    t = SessionTracker()
    t.schedule(1, 10)
    t.schedule(2, 20)
    assert t.cancel(1) is True
    assert t.cancel(1) is False
    assert t.deadline(1) is None
    t.clear()
    assert len(t) == 0 and t.next_deadline() is None and t.expired(10**12) == []


def test_max_count_limits_a_batch():
    t = SessionTracker()
    for k in range(10):
        t.schedule(k, k)
    assert t.expired(100, max_count=4) == [0, 1, 2, 3]
    assert len(t) == 6
    with pytest.raises(ValueError, match="max_count"):
        t.expired(100, max_count=-1)


def test_bad_keys_raise_python_errors_not_crashes():
    t = SessionTracker()
    with pytest.raises(OverflowError):
        t.schedule(-1, 10)
    with pytest.raises(OverflowError):
        t.schedule(2**64, 10)
    with pytest.raises(TypeError):
        t.schedule("member-1", 10)


def test_agrees_with_a_dict_model_under_random_operations():
    rng = random.Random(5)
    t = SessionTracker()
    model: dict[int, int] = {}
    now = 0
    for _ in range(20_000):
        op = rng.random()
        key = rng.randrange(200)
        if op < 0.6:
            d = now + rng.randrange(1, 3_000)
            t.schedule(key, d)
            model[key] = d
        elif op < 0.7:
            assert t.cancel(key) == (model.pop(key, None) is not None)
        else:
            now += rng.randrange(0, 200)
            got = t.expired(now)
            want = sorted((d, k) for k, d in model.items() if d <= now)
            assert sorted(got) == sorted(k for _, k in want)
            assert [model[k] for k in got] == sorted(model[k] for k in got)
            for k in got:
                del model[k]
        assert len(t) == len(model)
    assert t.next_deadline() == (min(model.values()) if model else None)
