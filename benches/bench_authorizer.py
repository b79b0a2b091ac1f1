"""The ACL authorizer's cost per check (klog/security/authorizer.py), sans-IO, as the hot path pays it: one
Produce or Fetch checks each topic once per request.

Run: ``.venv/bin/pytest benches/bench_authorizer.py -o addopts="" -s``

Cases: no ACL on the type (the default answer), 10 / 1,000 / 10,000 ACLs spread over literal topic names and
prefixes, a principal with an ALLOW among them and one without (every applicable ACL scanned), and the
super-user shortcut. Target (``MAX_CHECK_US``): a check costs at most 10 us with 10,000 ACLs, on this machine's
2 shared cores, so that authorizing a request stays well under its codec's cost.
"""

from __future__ import annotations

import time
import uuid

import pytest

from klog.metadata.image import AclEntry
from klog.security.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as Pt, ResourceType as Rt
from klog.security.authorizer import StandardAuthorizer

CHECKS = 200_000
MAX_CHECK_US = 10.0


def _acls(count: int) -> dict[uuid.UUID, AclEntry]:
    out = {}
    for i in range(count):
        pattern = Pt.PREFIXED if i % 4 == 0 else Pt.LITERAL
        name = f"team{i % 97}-" if pattern == Pt.PREFIXED else f"topic-{i}"
        out[uuid.uuid4()] = AclEntry(int(Rt.TOPIC), name, int(pattern), f"User:u{i % 50}", "*", int(Op.READ),
                                     int(Perm.ALLOW))
    out[uuid.uuid4()] = AclEntry(int(Rt.TOPIC), "orders", int(Pt.LITERAL), "User:alice", "*", int(Op.WRITE),
                                 int(Perm.ALLOW))
    out[uuid.uuid4()] = AclEntry(int(Rt.TOPIC), "ord", int(Pt.PREFIXED), "User:bob", "*", int(Op.ALL),
                                 int(Perm.DENY))
    return out


def _per_check_us(auth: StandardAuthorizer, acls: dict[uuid.UUID, AclEntry], principal: str, topic: str) -> float:
    auth.authorize(acls, principal, "10.0.0.1", Op.WRITE, Rt.TOPIC, topic)   # index built outside the timing
    started = time.perf_counter()
    for _ in range(CHECKS):
        auth.authorize(acls, principal, "10.0.0.1", Op.WRITE, Rt.TOPIC, topic)
    return (time.perf_counter() - started) / CHECKS * 1e6


@pytest.mark.parametrize("count", [0, 10, 1_000, 10_000])
def test_check_cost(count: int) -> None:
    acls = _acls(count)
    auth = StandardAuthorizer(["User:admin"])
    allowed = _per_check_us(auth, acls, "User:alice", "orders")
    denied = _per_check_us(auth, acls, "User:carol", "orders")
    prefixed = _per_check_us(auth, acls, "User:u1", "team1-events")
    super_user = _per_check_us(auth, acls, "User:admin", "orders")
    started = time.perf_counter()
    StandardAuthorizer().index(acls)
    index_ms = (time.perf_counter() - started) * 1000
    print(f"\n{count:>6} ACLs: allowed {allowed:.2f} us, denied {denied:.2f} us, denied under a prefix {prefixed:.2f} us, "
          f"super user {super_user:.2f} us per check; indexing {index_ms:.1f} ms")
    assert max(allowed, denied, prefixed) <= MAX_CHECK_US
