"""The ACL authorizer (klog.security.authorizer, Kafka's StandardAuthorizer rules), ACL filters and the
controller's ACL decisions (klog.controller.acls), without sockets."""

from __future__ import annotations

import uuid

import pytest

from klog.controller.acls import create_acls, delete_acls, describe_acls
from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, AclEntry
from klog.protocol.errors import ErrorCode as E
from klog.protocol.struct import Struct
from klog.security.acl import AclFilter, AclOperation as Op, AclPermissionType as Perm, PatternType as Pt, \
    ResourceType as Rt, create_error, has_unknown_code
from klog.security.authorizer import STANDARD_AUTHORIZER, StandardAuthorizer, authorizer_from_config
from klog.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def acl(rtype, name, op, perm=Perm.ALLOW, principal="User:alice", host="*", pattern=Pt.LITERAL):
    return AclEntry(int(rtype), name, int(pattern), principal, host, int(op), int(perm))


def acls(*entries):
    return {uuid.uuid4(): e for e in entries}


def check(auth, table, principal, op, rtype, name, host=HOST):
    return auth.authorize(table, principal, host, op, rtype, name)


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found():
    assert not check(StandardAuthorizer(), acls(), ALICE, Op.READ, Rt.TOPIC, "t")
    assert check(StandardAuthorizer(allow_everyone_if_no_acl_found=True), acls(), ALICE, Op.READ, Rt.TOPIC, "t")
    # an ACL for someone else on the resource: the resource has ACLs, so the default no longer applies
    table = acls(acl(Rt.TOPIC, "t", Op.READ, principal="User:bob"))
    assert not check(StandardAuthorizer(allow_everyone_if_no_acl_found=True), table, ALICE, Op.READ, Rt.TOPIC, "t")
    assert check(StandardAuthorizer(allow_everyone_if_no_acl_found=True), table, ALICE, Op.READ, Rt.TOPIC, "u")


def test_super_users_may_do_everything():
    auth = StandardAuthorizer(["User:admin", " User:ops "])
    table = acls(acl(Rt.TOPIC, "t", Op.ALL, Perm.DENY, principal="User:admin"))
    assert check(auth, table, KafkaPrincipal("User", "admin"), Op.DELETE, Rt.TOPIC, "t")
    assert check(auth, table, "User:ops", Op.ALTER, Rt.CLUSTER, "kafka-cluster")
    assert not check(auth, table, ALICE, Op.READ, Rt.TOPIC, "t")


def test_literal_prefixed_and_wildcard_patterns():
    auth = StandardAuthorizer()
    table = acls(acl(Rt.TOPIC, "orders", Op.READ),
                 acl(Rt.TOPIC, "pay", Op.WRITE, pattern=Pt.PREFIXED),
                 acl(Rt.GROUP, "*", Op.READ))
    assert check(auth, table, ALICE, Op.READ, Rt.TOPIC, "orders")
    assert not check(auth, table, ALICE, Op.READ, Rt.TOPIC, "orders2")      # literal: the exact name only
    assert check(auth, table, ALICE, Op.WRITE, Rt.TOPIC, "payments")
    assert check(auth, table, ALICE, Op.WRITE, Rt.TOPIC, "pay")             # a prefix includes the name itself
    assert not check(auth, table, ALICE, Op.WRITE, Rt.TOPIC, "pa")
    assert check(auth, table, ALICE, Op.READ, Rt.GROUP, "any-group")
    assert not check(auth, table, ALICE, Op.READ, Rt.TOPIC, "any-group")    # types do not mix
    assert not check(auth, table, BOB, Op.READ, Rt.TOPIC, "orders")


def test_deny_wins_over_allow_whatever_the_pattern():
    auth = StandardAuthorizer()
    table = acls(acl(Rt.TOPIC, "*", Op.ALL), acl(Rt.TOPIC, "secret", Op.READ, Perm.DENY, pattern=Pt.PREFIXED))
    assert check(auth, table, ALICE, Op.READ, Rt.TOPIC, "public")
    assert not check(auth, table, ALICE, Op.READ, Rt.TOPIC, "secret-plans")
    assert check(auth, table, ALICE, Op.WRITE, Rt.TOPIC, "secret-plans")    # only READ is denied
    # a DENY on READ does not deny the DESCRIBE it would imply as an ALLOW
    assert check(auth, table, ALICE, Op.DESCRIBE, Rt.TOPIC, "secret-plans")


def test_implied_operations():
    auth = StandardAuthorizer()
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert check(auth, acls(acl(Rt.TOPIC, "t", op)), ALICE, Op.DESCRIBE, Rt.TOPIC, "t"), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        assert not check(auth, acls(acl(Rt.TOPIC, "t", op)), ALICE, Op.DESCRIBE, Rt.TOPIC, "t"), op
    assert check(auth, acls(acl(Rt.TOPIC, "t", Op.ALTER_CONFIGS)), ALICE, Op.DESCRIBE_CONFIGS, Rt.TOPIC, "t")
    assert not check(auth, acls(acl(Rt.TOPIC, "t", Op.DESCRIBE)), ALICE, Op.READ, Rt.TOPIC, "t")
    assert check(auth, acls(acl(Rt.TOPIC, "t", Op.ALL)), ALICE, Op.IDEMPOTENT_WRITE, Rt.TOPIC, "t")


def test_principal_wildcard_and_hosts():
    auth = StandardAuthorizer()
    table = acls(acl(Rt.TOPIC, "t", Op.READ, principal="User:*", host="10.0.0.1"))
    assert check(auth, table, BOB, Op.READ, Rt.TOPIC, "t", host="10.0.0.1")
    assert not check(auth, table, BOB, Op.READ, Rt.TOPIC, "t", host="10.0.0.2")


def test_authorized_operations_bits_and_authorize_any():
    auth = StandardAuthorizer()
    table = acls(acl(Rt.TOPIC, "t", Op.READ), acl(Rt.TOPIC, "t", Op.ALTER_CONFIGS))
    bits = auth.authorized_operations(table, ALICE, HOST, Rt.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.DESCRIBE_CONFIGS) | (1 << Op.ALTER_CONFIGS)
    assert auth.authorize_any(table, ALICE, HOST, Op.READ, Rt.TOPIC)
    assert not auth.authorize_any(table, ALICE, HOST, Op.WRITE, Rt.TOPIC)
    denied = acls(acl(Rt.TOPIC, "p", Op.WRITE, pattern=Pt.PREFIXED),
                  acl(Rt.TOPIC, "p", Op.WRITE, Perm.DENY, pattern=Pt.PREFIXED))
    assert not auth.authorize_any(denied, ALICE, HOST, Op.WRITE, Rt.TOPIC)


def test_index_follows_the_image_mapping():
    auth = StandardAuthorizer()
    first = acls(acl(Rt.TOPIC, "t", Op.READ))
    assert check(auth, first, ALICE, Op.READ, Rt.TOPIC, "t")
    assert not check(auth, acls(), ALICE, Op.READ, Rt.TOPIC, "t")        # a new mapping is indexed again


def test_authorizer_from_config():
    assert authorizer_from_config("", [], False) is None
    assert isinstance(authorizer_from_config(STANDARD_AUTHORIZER, ["User:a", ""], True), StandardAuthorizer)
    with pytest.raises(ValueError, match="StandardAuthorizer only"):
        authorizer_from_config("kafka.security.authorizer.AclAuthorizer", [], False)


# ---- filters (Kafka's AclBindingFilter.matches) -------------------------------------------------------------

def test_filter_match_any_and_exact():
    lit = acl(Rt.TOPIC, "orders", Op.READ)
    pre = acl(Rt.TOPIC, "ord", Op.READ, pattern=Pt.PREFIXED)
    star = acl(Rt.TOPIC, "*", Op.READ)
    every = AclFilter(Rt.ANY, None, Pt.ANY, None, None, Op.ANY, Perm.ANY)
    assert all(every.matches(e) for e in (lit, pre, star))
    match = AclFilter(Rt.TOPIC, "orders", Pt.MATCH, None, None, Op.ANY, Perm.ANY)
    assert all(match.matches(e) for e in (lit, pre, star))
    assert not match.matches(acl(Rt.TOPIC, "orders-x", Op.READ, pattern=Pt.PREFIXED))
    exact = AclFilter(Rt.TOPIC, "orders", Pt.ANY, None, None, Op.ANY, Perm.ANY)
    assert [exact.matches(e) for e in (lit, pre, star)] == [True, False, False]
    literal = AclFilter(Rt.TOPIC, None, Pt.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW)
    assert [literal.matches(e) for e in (lit, pre, star)] == [True, False, True]
    assert not AclFilter(Rt.ANY, None, Pt.ANY, "User:bob", None, Op.ANY, Perm.ANY).matches(lit)
    assert not AclFilter(Rt.ANY, None, Pt.ANY, None, None, Op.WRITE, Perm.ANY).matches(lit)
    assert not AclFilter(Rt.ANY, None, Pt.ANY, None, None, Op.ANY, Perm.DENY).matches(lit)


def test_create_validation_messages_are_kafkas():
    invalid = E.INVALID_REQUEST
    assert create_error(acl(Rt.CLUSTER, "c", Op.ALTER)) == (
        invalid, "The only valid name for the CLUSTER resource is kafka-cluster")
    assert create_error(acl(Rt.TOPIC, "", Op.READ)) == (invalid, "Invalid empty resource name")
    # filter-only values do not make an ACL binding in Kafka: an unknown server error without message
    assert create_error(acl(Rt.ANY, "t", Op.READ)) == (E.UNKNOWN_SERVER_ERROR, None)
    assert create_error(acl(Rt.TOPIC, "t", Op.READ, pattern=Pt.MATCH)) == (E.UNKNOWN_SERVER_ERROR, None)
    assert create_error(acl(Rt.TOPIC, "t", Op.ANY)) == (E.UNKNOWN_SERVER_ERROR, None)
    assert create_error(acl(Rt.TOPIC, "t", Op.READ, Perm.ANY)) == (E.UNKNOWN_SERVER_ERROR, None)
    assert create_error(acl(Rt.TOPIC, "t", 99)) == (invalid, "Invalid operation UNKNOWN")
    assert create_error(acl(Rt.TOPIC, "t", Op.READ, principal="alice"))[1].startswith(
        "Could not parse principal from `alice`")
    assert create_error(acl(Rt.CLUSTER, "kafka-cluster", Op.ALTER)) is None
    assert has_unknown_code(acl(Rt.TOPIC, "t", 0)) and not has_unknown_code(acl(Rt.TOPIC, "t", 99))


# ---- the controller's decisions, replayed into an image ------------------------------------------------------

def creation(entry: AclEntry) -> Struct:
    return Struct(resource_type=entry.resource_type, resource_name=entry.resource_name,
                  resource_pattern_type=entry.pattern_type, principal=entry.principal, host=entry.host,
                  operation=entry.operation, permission_type=entry.permission_type)


def dfilter(rtype=Rt.ANY, name=None, pattern=Pt.ANY, principal=None, host=None, op=Op.ANY, perm=Perm.ANY):
    return Struct(resource_type_filter=int(rtype), resource_name_filter=name, pattern_type_filter=int(pattern),
                  principal_filter=principal, host_filter=host, operation=int(op), permission_type=int(perm))


def test_create_describe_delete_through_records():
    a = acl(Rt.TOPIC, "t", Op.READ)
    b = acl(Rt.GROUP, "g", Op.ALL, Perm.DENY, pattern=Pt.PREFIXED)
    result = create_acls([creation(a), creation(b), creation(a), creation(acl(Rt.TOPIC, "", Op.READ))], EMPTY_IMAGE)
    assert [r["error_code"] for r in result.response] == [0, 0, 0, E.INVALID_REQUEST]
    assert len(result.records) == 2                                        # the duplicate stores nothing
    image, _ = replay(EMPTY_IMAGE, list(result.records))
    assert sorted(image.acls.values(), key=str) == sorted([a, b], key=str)
    again = create_acls([creation(a)], image)
    assert not again.records                                               # already stored: success, no record
    assert again.response == [{"error_code": 0, "error_message": ""}]      # Kafka's: empty, not null
    described = describe_acls(dfilter(Rt.TOPIC), image.acls)
    assert described["resources"] == [{"resource_type": 2, "resource_name": "t", "pattern_type": 3, "acls": [
        {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]}]
    assert describe_acls(dfilter(99), image.acls)["resources"] == []      # a code Kafka does not know
    deleted = delete_acls([dfilter(Rt.GROUP), dfilter(Rt.ANY), dfilter(op=Op.UNKNOWN)], image)
    assert [len(r["matching_acls"]) for r in deleted.response] == [1, 2, 0]
    assert deleted.response[2]["error_code"] == E.INVALID_REQUEST
    assert len(deleted.records) == 2                                       # each ACL removed once
    image, _ = replay(image, list(deleted.records))
    assert not image.acls
