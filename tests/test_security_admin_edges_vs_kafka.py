"""The security admin APIs at their edges, on klog and on Apache Kafka 4.x (StandardAuthorizer, super user admin,
SASL/PLAIN) from the same properties, over the wire: CreateAcls/DescribeAcls/DeleteAcls with invalid codes, odd
principals and names, filter-only values, MATCH/ANY/PREFIXED filters and overlapping DeleteAcls filters; what a
principal without Cluster ACLs gets; AlterUserScramCredentials/DescribeUserScramCredentials' refusals, messages and
result order; AlterClientQuotas/DescribeClientQuotas' refusals, duplicate entities and filter semantics. Each
test uses names of its own; answers are compared as sets where Kafka's order is its hash maps' (see
docs/reliability.md, "Security admin APIs against Apache Kafka")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode as E
from klog.security.sasl import plain_token
from klog.testing.kafka import free_port, one_broker, sasl_plain_authorizer_properties
from klog.testing.wire import WireClient, until

pytestmark = pytest.mark.java

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
PROPERTIES = sasl_plain_authorizer_properties(USERS)
TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, ALTER, DESCRIBE = 3, 4, 7, 8
DENY, ALLOW = 2, 3
NO_COLON = "(no colon is present separating the principal type from the principal name)"


@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory) -> Iterator[dict[str, str]]:
    """The PLAINTEXT (a super user) and SASL_PLAINTEXT bootstraps of a klog or an Apache Kafka broker."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port = free_port()
    with one_broker(request.param, root, PROPERTIES,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]) as bootstrap:
        yield {"plain": bootstrap, "sasl": f"127.0.0.1:{sasl_port}"}


def _ask(server: dict[str, str], api: int, version: int, body: dict[str, Any], user: str | None = None) -> Any:
    host, port = server["sasl" if user else "plain"].rsplit(":", 1)
    with WireClient(host, int(port)) as wire:
        if user is not None:
            assert wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == E.NONE
            login = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_token(user, USERS[user])})
            assert login.error_code == E.NONE
        return wire.request(api, version, body)


def _closes(server: dict[str, str], api: int, version: int, body: dict[str, Any]) -> bool:
    try:
        _ask(server, api, version, body)
    except ConnectionError:
        return True
    return False


def _acl(name: str, rt: int = TOPIC, pt: int = LITERAL, principal: str = "User:alice", host: str = "*",
         op: int = READ, perm: int = ALLOW) -> dict[str, Any]:
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pt, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


def _filter(rt: int = ANY, name: str | None = None, pt: int = ANY, principal: str | None = None,
            host: str | None = None, op: int = ANY, perm: int = ANY) -> dict[str, Any]:
    return {"resource_type_filter": rt, "resource_name_filter": name, "pattern_type_filter": pt,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def _create(server: dict[str, str], *creations: dict[str, Any]) -> list[tuple[int, str | None]]:
    answer = _ask(server, ApiKey.CREATE_ACLS, 3, {"creations": list(creations)})
    return [(r.error_code, r.error_message) for r in answer.results]


def _described(server: dict[str, str], flt: dict[str, Any]) -> set[tuple[Any, ...]]:
    answer = _ask(server, ApiKey.DESCRIBE_ACLS, 3, flt)
    assert (answer.error_code, answer.error_message) == (E.NONE, "")
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in answer.resources for a in r.acls}


def _binding(acl: dict[str, Any]) -> tuple[Any, ...]:
    return (acl["resource_type"], acl["resource_name"], acl["resource_pattern_type"], acl["principal"],
            acl["host"], acl["operation"], acl["permission_type"])


def _seen(server: dict[str, str], *acls: dict[str, Any]) -> None:
    """Wait until this broker's authorizer lists every ACL in ``acls`` (Kafka's is updated after the commit)."""
    wanted = {_binding(a) for a in acls}
    until(lambda: wanted <= _described(server, _filter()), f"ACLs {wanted}", timeout=30)


def _uid() -> str:
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------------------------------------- CreateAcls

def test_create_acls_refusals_as_kafka(server):
    """Each creation refused with Kafka's code and message, the broker's checks (CLUSTER name, empty name) before
    the controller's (resource type, pattern type, operation, permission, then the principal's form); a code
    Kafka does not know is UNKNOWN in its message. A success's message is empty, not null."""
    n = f"c-{_uid()}"
    cases = [
        (_acl(n, rt=CLUSTER, op=ALTER), (E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is "
                                                            "kafka-cluster")),
        (_acl("", rt=CLUSTER, principal="bad"), (E.INVALID_REQUEST, "The only valid name for the CLUSTER resource "
                                                                    "is kafka-cluster")),
        (_acl("", pt=PREFIXED), (E.INVALID_REQUEST, "Invalid empty resource name")),
        (_acl("", pt=99, principal="bad"), (E.INVALID_REQUEST, "Invalid empty resource name")),
        (_acl(n, rt=99), (E.INVALID_REQUEST, "Invalid resourceType UNKNOWN")),
        (_acl(n, rt=99, principal="bad"), (E.INVALID_REQUEST, "Invalid resourceType UNKNOWN")),
        (_acl(n, pt=99, principal="User"), (E.INVALID_REQUEST, "Invalid patternType UNKNOWN")),
        (_acl(n, op=99, principal=""), (E.INVALID_REQUEST, "Invalid operation UNKNOWN")),
        (_acl(n, perm=99, principal="x"), (E.INVALID_REQUEST, "Invalid permissionType UNKNOWN")),
        (_acl(n, principal="User"), (E.INVALID_REQUEST, f"Could not parse principal from `User` {NO_COLON}")),
        (_acl(n, principal=""), (E.INVALID_REQUEST, f"Could not parse principal from `` {NO_COLON}")),
        (_acl(n, pt=MATCH), (E.UNKNOWN_SERVER_ERROR, None)),
        (_acl(n, rt=ANY, principal="bad"), (E.UNKNOWN_SERVER_ERROR, None)),
        (_acl(f"{n}-ok"), (E.NONE, "")),
    ]
    for creation, expected in cases:
        assert _create(server, creation) == [expected], creation


def test_a_filter_only_value_fails_the_whole_create_acls_request(server):
    """An ANY or MATCH value in one creation: Kafka cannot build the request's bindings, every creation answers
    UNKNOWN_SERVER_ERROR and none is stored (klog answered the others and stored the valid ones). Other
    refusals are per creation."""
    n = _uid()
    valid, later = _acl(f"f-{n}-1"), _acl(f"f-{n}-2")
    for bad in (_acl(n, rt=ANY), _acl(n, pt=ANY), _acl(n, op=ANY), _acl(n, perm=ANY)):
        assert _create(server, valid, bad, _acl(n, principal="bad"), later) == [(E.UNKNOWN_SERVER_ERROR, None)] * 4
    mixed = _create(server, valid, _acl(f"f-{n}-3", principal="bad"))
    assert mixed == [(E.NONE, ""), (E.INVALID_REQUEST, f"Could not parse principal from `bad` {NO_COLON}")]
    _seen(server, valid)
    assert _binding(later) not in _described(server, _filter(rt=TOPIC, name=later["resource_name"]))


def test_create_acls_takes_any_principal_with_a_colon_and_a_duplicate_once(server):
    n = f"d-{_uid()}"
    accepted = [_acl(n, principal=":x"), _acl(n, principal="User:"), _acl(n, principal="Group:x"),
                _acl(n, principal="User:*"), _acl(n, host=""), _acl(n, host="not a host"), _acl(n, op=13),
                _acl(f"{n}-", pt=PREFIXED), _acl("*", pt=PREFIXED, principal=f"User:{n}"),
                _acl("kafka-cluster", rt=CLUSTER, principal=f"User:{n}", op=DESCRIBE)]
    assert _create(server, *accepted, accepted[0]) == [(E.NONE, "")] * (len(accepted) + 1)
    _seen(server, *accepted)
    answer = _ask(server, ApiKey.DESCRIBE_ACLS, 3, _filter(rt=TOPIC, name=n, pt=LITERAL))
    assert sum(len(r.acls) for r in answer.resources) == 7   # the duplicate stored once


# ------------------------------------------------------------------------------------ unknown codes in filters

def test_acl_requests_with_an_unknown_zero_code_close_the_connection(server):
    """A code 0 (UNKNOWN) anywhere: Kafka's broker cannot parse the request and closes the connection."""
    for field in ("resource_type", "resource_pattern_type", "operation", "permission_type"):
        assert _closes(server, ApiKey.CREATE_ACLS, 3, {"creations": [{**_acl("z"), field: 0}]}), field
    for field in ("resource_type_filter", "pattern_type_filter", "operation", "permission_type"):
        flt = {**_filter(), field: 0}
        assert _closes(server, ApiKey.DESCRIBE_ACLS, 3, flt), field
        assert _closes(server, ApiKey.DELETE_ACLS, 3, {"filters": [_filter(name="z"), flt]}), field


def test_acl_filters_with_codes_kafka_does_not_know_are_answered(server):
    """Another code Kafka does not know (99, -1, 16) parses as UNKNOWN and is answered (klog closed the
    connection): DescribeAcls lists nothing, DeleteAcls refuses that filter with the controller's message and
    applies the request's other filters."""
    n = f"u-{_uid()}"
    mine = _acl(n)
    assert _create(server, mine) == [(E.NONE, "")]
    _seen(server, mine)
    for field, code in (("resource_type_filter", 99), ("pattern_type_filter", 99), ("operation", 16),
                        ("permission_type", -1)):
        answer = _ask(server, ApiKey.DESCRIBE_ACLS, 3, {**_filter(), field: code})
        assert (answer.error_code, answer.error_message, list(answer.resources)) == (E.NONE, "", []), field
    deleted = _ask(server, ApiKey.DELETE_ACLS, 3, {"filters": [
        _filter(rt=99), _filter(pt=99), _filter(op=99), _filter(perm=99), _filter(rt=TOPIC, name=n)]})
    got = [(r.error_code, r.error_message, len(r.matching_acls)) for r in deleted.filter_results]
    assert got == [(E.INVALID_REQUEST, "Unknown patternFilter.", 0), (E.INVALID_REQUEST, "Unknown patternFilter.", 0),
                   (E.INVALID_REQUEST, "Unknown entryFilter.", 0), (E.INVALID_REQUEST, "Unknown entryFilter.", 0),
                   (E.NONE, None, 1)]
    until(lambda: not _described(server, _filter(rt=TOPIC, name=n)), "the ACL deleted", timeout=30)


# ---------------------------------------------------------------------------------- DescribeAcls / DeleteAcls

def test_describe_acls_filters_match_as_kafka(server):
    n = f"m{_uid()}"
    topic, prefix, longer, star = _acl(f"{n}-topic"), _acl(f"{n}-", pt=PREFIXED), \
        _acl(f"{n}-t", pt=PREFIXED, op=WRITE), _acl("*", principal=f"User:{n}")
    deny = _acl(f"{n}-topic", principal="User:bob", host="1.2.3.4", perm=DENY)
    group = _acl(f"{n}-topic", rt=GROUP)
    acls = [topic, prefix, longer, star, deny, group]
    assert _create(server, *acls) == [(E.NONE, "")] * len(acls)
    _seen(server, *acls)
    b = {id(a): _binding(a) for a in acls}

    def described(**kw: Any) -> set[tuple[Any, ...]]:
        # only this test's ACLs (others' wildcard ACLs would match MATCH filters too)
        return _described(server, _filter(**kw)) & set(b.values())

    assert described(name=f"{n}-topic", pt=MATCH) == set(b.values())
    assert described(rt=TOPIC, name=f"{n}-topic", pt=MATCH) == {b[id(a)] for a in (topic, prefix, longer, star,
                                                                                      deny)}
    assert described(name=f"{n}-topic") == {b[id(topic)], b[id(deny)], b[id(group)]}
    assert described(name=f"{n}-topic", pt=LITERAL) == {b[id(topic)], b[id(deny)], b[id(group)]}
    assert described(name=f"{n}-", pt=PREFIXED) == {b[id(prefix)]}
    assert described(name=f"{n}-topic", pt=PREFIXED) == set()
    assert described(rt=TOPIC, name="*", pt=MATCH, principal=f"User:{n}") == {b[id(star)]}
    assert described(rt=TOPIC, name="*", pt=LITERAL, principal=f"User:{n}") == {b[id(star)]}
    assert described(pt=MATCH, principal=f"User:{n}") == {b[id(star)]}   # a null name: every pattern
    assert described(host="1.2.3.4") == {b[id(deny)]}
    assert described(perm=DENY, name=f"{n}-topic") == {b[id(deny)]}
    assert described(op=WRITE, name=f"{n}-tx", pt=MATCH) == {b[id(longer)]}
    assert described(name="", pt=ANY) == set() and described(principal="") == set()


def test_delete_acls_filters_matching_the_same_acl_each_report_it(server):
    """Every filter reports each ACL it matches (with its fields and a null message); an ACL matched by several
    filters is removed once; a filter matching nothing answers an empty list."""
    n = f"x{_uid()}"
    alice, bob, prefix = _acl(f"{n}-topic"), _acl(f"{n}-topic", principal="User:bob"), _acl(f"{n}-", pt=PREFIXED)
    assert _create(server, alice, bob, prefix) == [(E.NONE, "")] * 3
    _seen(server, alice, bob, prefix)
    answer = _ask(server, ApiKey.DELETE_ACLS, 3, {"filters": [
        _filter(rt=TOPIC, name=f"{n}-topic", pt=MATCH, principal="User:alice"),
        _filter(principal="User:bob", name=f"{n}-topic"), _filter(rt=TOPIC, name=f"{n}-nothing"),
        _filter(rt=TOPIC, name=f"{n}-topic")]})
    results = [(r.error_code, r.error_message, {(m.error_code, m.error_message, m.resource_type, m.resource_name,
                                                 m.pattern_type, m.principal, m.host, m.operation,
                                                 m.permission_type) for m in r.matching_acls})
               for r in answer.filter_results]
    assert results == [(E.NONE, None, {(E.NONE, None, *_binding(alice)), (E.NONE, None, *_binding(prefix))}),
                       (E.NONE, None, {(E.NONE, None, *_binding(bob))}), (E.NONE, None, set()),
                       (E.NONE, None, {(E.NONE, None, *_binding(alice)), (E.NONE, None, *_binding(bob))})]
    until(lambda: not _described(server, _filter(name=f"{n}-topic", pt=MATCH)) & {
        _binding(alice), _binding(bob), _binding(prefix)}, "the ACLs deleted", timeout=30)
    assert _ask(server, ApiKey.DELETE_ACLS, 3, {"filters": []}).filter_results == []


def test_a_principal_without_cluster_acls(server):
    """bob has no ACL on the Cluster: the ACL and quota APIs answer CLUSTER_AUTHORIZATION_FAILED (Kafka's ACL
    messages name its internal request object, klog's say "Cluster authorization failed."), one result per
    creation/filter/entity/user asked for, nothing changed."""
    n = f"p-{_uid()}"
    denied = E.CLUSTER_AUTHORIZATION_FAILED
    answer = _ask(server, ApiKey.DESCRIBE_ACLS, 3, _filter(), user="bob")
    assert (answer.error_code, list(answer.resources)) == (denied, [])
    answer = _ask(server, ApiKey.CREATE_ACLS, 3, {"creations": [_acl(n), _acl(n, rt=ANY)]}, user="bob")
    assert [r.error_code for r in answer.results] == [denied, denied]
    answer = _ask(server, ApiKey.DELETE_ACLS, 3, {"filters": [_filter(name=n), _filter(op=99)]}, user="bob")
    assert [(r.error_code, list(r.matching_acls)) for r in answer.filter_results] == [(denied, [])] * 2
    answer = _ask(server, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False}, user="bob")
    assert (answer.error_code, answer.error_message, answer.entries) == (denied, None, None)
    answer = _ask(server, ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [_quota_entry([("user", n)], [
        ("producer_byte_rate", 1024.0)])], "validate_only": False}, user="bob")
    assert [r.error_code for r in answer.entries] == [denied]
    answer = _ask(server, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": n}, {"name": "y"}]},
                  user="bob")
    assert (answer.error_code, [(r.user, r.error_code) for r in answer.results]) == (denied, [("", denied)] * 2)
    answer = _ask(server, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [{"name": n, "mechanism": 1}],
                                                                   "upsertions": [_upsert(f"{n}-2")]}, user="bob")
    assert sorted((r.user, r.error_code) for r in answer.results) == [(n, denied), (f"{n}-2", denied)]
    assert _quotas(server, [_component("user", 0, n)]) == {}


# ------------------------------------------------------------------------------------------------------ SCRAM

def _upsert(name: str, mechanism: int = 2, iterations: int = 4096, salt: bytes = b"salt",
            salted: bytes = b"p" * 64) -> dict[str, Any]:
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt, "salted_password": salted}


def _alter_scram(server: dict[str, str], deletions: list[tuple[str, int]], upsertions: list[dict[str, Any]]
                 ) -> list[tuple[str, int, str | None]]:
    answer = _ask(server, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [{"name": n, "mechanism": m} for n, m in deletions], "upsertions": upsertions})
    return [(r.user, r.error_code, r.error_message) for r in answer.results]


def test_alter_user_scram_credentials_refusals_as_kafka(server):
    n = f"s{_uid()}"
    twice = "A user credential cannot be altered twice in the same request"
    cases = [
        ([], [_upsert(f"{n}a", mechanism=0)], (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
        ([], [_upsert(f"{n}a", mechanism=99)], (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
        ([(f"{n}a", 0)], [], (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
        ([], [_upsert(f"{n}a", iterations=4095)], (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
        ([], [_upsert(f"{n}a", iterations=-1)], (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
        ([], [_upsert(f"{n}a", iterations=16385)], (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations")),
        ([], [_upsert(f"{n}a", salted=b"")], (E.UNKNOWN_SERVER_ERROR, None)),
        ([(f"{n}a", 1)], [], (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")),
        ([(f"{n}a", 1)], [_upsert(f"{n}a")], (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that "
                                                                   "does not exist")),
        ([], [_upsert(f"{n}a"), _upsert(f"{n}a", mechanism=1)], (E.DUPLICATE_RESOURCE, twice)),
    ]
    for deletions, upsertions, (code, message) in cases:
        assert _alter_scram(server, deletions, upsertions) == [(f"{n}a", code, message)], (deletions, upsertions)
    assert _alter_scram(server, [], [_upsert("")]) == [("", E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]
    assert _alter_scram(server, [("", 1)], []) == [("", E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]
    # an empty salt is stored as it is; 16384 iterations are allowed
    assert _alter_scram(server, [], [_upsert(f"{n}b", salt=b"", iterations=16384)]) == [(f"{n}b", E.NONE, None)]
    assert _alter_scram(server, [(f"{n}b", 2)], [_upsert(f"{n}b")]) == [(f"{n}b", E.DUPLICATE_RESOURCE, twice)]
    assert _alter_scram(server, [(f"{n}b", 2), (f"{n}b", 2), (f"{n}b", 2)], []) == [
        (f"{n}b", E.DUPLICATE_RESOURCE, twice)]

    def described() -> list[tuple[Any, ...]]:
        answer = _ask(server, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": f"{n}b"}]})
        return [(r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
                for r in answer.results]

    until(lambda: described() == [(f"{n}b", E.NONE, [(2, 16384)])], "the credential", timeout=30)


def test_alter_user_scram_credentials_answers_deletions_then_upsertions_then_refusals(server):
    """Kafka answers the users deleting, then those upserting, then those refused (klog answered in the order
    the request named them); which refused user comes first is Kafka's hash map's, so they are compared as a
    set."""
    n = f"o{_uid()}"
    assert _alter_scram(server, [], [_upsert(f"{n}-old")]) == [(f"{n}-old", E.NONE, None)]
    got = _alter_scram(server, [(f"{n}-missing", 2), (f"{n}-old", 2)], [_upsert(f"{n}-new"),
                                                                          _upsert(f"{n}-few", iterations=1)])
    assert got[:2] == [(f"{n}-old", E.NONE, None), (f"{n}-new", E.NONE, None)]
    assert set(got[2:]) == {(f"{n}-missing", E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does "
                                                                   "not exist"),
                            (f"{n}-few", E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")}


def test_describe_user_scram_credentials_messages_as_kafka(server):
    n = f"r{_uid()}"
    assert _alter_scram(server, [], [_upsert(n, mechanism=1)]) == [(n, E.NONE, None)]
    until(lambda: _ask(server, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": n}]}
                       ).results[0].error_code == E.NONE, "the credential", timeout=30)
    answer = _ask(server, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [
        {"name": n}, {"name": f"{n}-dup"}, {"name": f"{n}-dup"}, {"name": f"{n}-none"}, {"name": ""}]})
    assert (answer.error_code, answer.error_message) == (E.NONE, "")
    got = {(r.user, r.error_code, r.error_message, tuple((i.mechanism, i.iterations) for i in r.credential_infos))
           for r in answer.results}
    assert got == {
        (n, E.NONE, "", ((1, 4096),)),
        (f"{n}-dup", E.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in a single "
                                           f"request: {n}-dup", ()),
        (f"{n}-none", E.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {n}-none",
         ()),
        ("", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: ", ())}
    everyone = _ask(server, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": []})
    assert (everyone.error_code, everyone.error_message) == (E.NONE, "")
    assert (n, E.NONE, "") in {(r.user, r.error_code, r.error_message) for r in everyone.results}


# ----------------------------------------------------------------------------------------------------- quotas

def _quota_entry(entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]) -> dict[str, Any]:
    return {"entity": [{"entity_type": t, "entity_name": name} for t, name in entity],
            "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops]}


def _alter_quotas(server: dict[str, str], *entries: dict[str, Any], validate_only: bool = False
                  ) -> set[tuple[Any, ...]]:
    answer = _ask(server, ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": list(entries), "validate_only": validate_only})
    return {(r.error_code, r.error_message, tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)))
            for r in answer.entries}


def _component(entity_type: str, match_type: int, match: str | None = None) -> dict[str, Any]:
    return {"entity_type": entity_type, "match_type": match_type, "match": match}


def _quotas(server: dict[str, str], components: list[dict[str, Any]], strict: bool = False
            ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    answer = _ask(server, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": strict})
    assert (answer.error_code, answer.error_message) == (E.NONE, "")
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in answer.entries}


def test_alter_client_quotas_refusals_as_kafka(server):
    n = f"q{_uid()}"
    rate = [("producer_byte_rate", 1024.0)]
    cases = [
        (_quota_entry([("group", n)], rate), "Unhandled client quota entity type: group", (("group", n),)),
        (_quota_entry([("ip", "1.2.3.4"), ("user", n)], [("connection_creation_rate", 5.0)]),
         "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
         (("ip", "1.2.3.4"), ("user", n))),
        (_quota_entry([("user", n)], [("foo", 1.0)]), "Invalid configuration key foo", (("user", n),)),
        (_quota_entry([("user", n)], [("producer_byte_rate", 0.0)]), "Quota producer_byte_rate must be greater "
                                                                      "than 0", (("user", n),)),
        (_quota_entry([("user", n)], [("request_percentage", -1.0)]), "Quota request_percentage must be greater "
                                                                       "than 0", (("user", n),)),
        (_quota_entry([("user", n)], [("consumer_byte_rate", 1.5)]), "consumer_byte_rate cannot be a fractional "
                                                                      "value.", (("user", n),)),
        (_quota_entry([("user", "")], rate), "Empty user not supported", (("user", ""),)),
        (_quota_entry([], rate), "Invalid empty client quota entity", ()),
        (_quota_entry([("ip", "not-an-ip")], [("connection_creation_rate", 5.0)]),
         "not-an-ip is not a valid IP or resolvable host.", (("ip", "not-an-ip"),)),
    ]
    for entry, message, entity in cases:
        assert _alter_quotas(server, entry) == {(E.INVALID_REQUEST, message, entity)}, entry
    assert _quotas(server, [_component("user", 0, n)]) == {}


def test_an_entity_named_twice_in_alter_client_quotas(server):
    """Kafka answers once per entity: an entity named again, or given a key twice, answers INVALID_REQUEST
    "Ignoring duplicate entity ..." and only its first entry applies (klog applied both entries, the last value
    of a key given twice); an entity naming its type twice is the last name's."""
    n = f"e{_uid()}"
    got = _alter_quotas(server, _quota_entry([("user", f"{n}a")], [("producer_byte_rate", 1024.0)]),
                        _quota_entry([("user", f"{n}a")], [("consumer_byte_rate", 2048.0)]),
                        _quota_entry([("user", f"{n}b")], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)]),
                        _quota_entry([("client-id", f"{n}c"), ("user", None)], [("request_percentage", 50.0)]),
                        _quota_entry([("user", f"{n}d"), ("user", f"{n}e")], [("producer_byte_rate", 4096.0)]))
    assert got == {
        (E.INVALID_REQUEST, f"Ignoring duplicate entity ClientQuotaEntity(entries={{user={n}a}})", (("user", f"{n}a"),)),
        (E.INVALID_REQUEST, f"Ignoring duplicate entity ClientQuotaEntity(entries={{user={n}b}})", (("user", f"{n}b"),)),
        (E.NONE, None, (("client-id", f"{n}c"), ("user", None))),
        (E.NONE, None, (("user", f"{n}e"),))}
    # (Kafka's broker answers from its image, updated a moment after the commit)
    until(lambda: _quotas(server, [_component("user", 0, f"{n}e")]) == {
        (("user", f"{n}e"),): {"producer_byte_rate": 4096.0}}, "the quota", timeout=30)
    assert _quotas(server, [_component("user", 0, f"{n}a")]) == {(("user", f"{n}a"),): {"producer_byte_rate": 1024.0}}
    assert _quotas(server, [_component("user", 0, f"{n}b")]) == {}
    assert _quotas(server, [_component("user", 0, f"{n}d")]) == {}
    _alter_quotas(server, _quota_entry([("client-id", f"{n}c"), ("user", None)], [("request_percentage", None)]))
    # validate_only: the same answers, nothing stored
    got = _alter_quotas(server, _quota_entry([("user", f"{n}v")], [("producer_byte_rate", 1024.0)]),
                        _quota_entry([("user", f"{n}w")], [("foo", 1.0)]), validate_only=True)
    assert got == {(E.NONE, None, (("user", f"{n}v"),)),
                   (E.INVALID_REQUEST, "Invalid configuration key foo", (("user", f"{n}w"),))}
    assert _quotas(server, [_component("user", 0, f"{n}v")]) == {}


def test_describe_client_quotas_filter_refusals_as_kafka(server):
    """Checked component by component in Kafka's order (empty type, a type twice, an unknown type, the match),
    then the IP combination; a refusal answers null entries."""
    cases = [
        ([_component("", 0, "x")], E.INVALID_REQUEST, "Invalid empty entity type."),
        ([_component("user", 0, "x"), _component("", 0, "x")], E.INVALID_REQUEST, "Invalid empty entity type."),
        ([_component("user", 0, "x"), _component("user", 2)], E.INVALID_REQUEST,
         "Entity type user cannot appear more than once in the filter."),
        ([_component("foo", 0, "x")], E.UNSUPPORTED_VERSION, "Unsupported entity type foo"),
        ([_component("foo", 7, "x")], E.UNSUPPORTED_VERSION, "Unsupported entity type foo"),
        ([_component("foo", 0, "x"), _component("foo", 0, "x")], E.UNSUPPORTED_VERSION, "Unsupported entity type foo"),
        ([_component("user", 0)], E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to "
                                                     "null."),
        ([_component("user", 1, "x")], E.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified "
                                                          "a match string."),
        ([_component("user", 2, "x")], E.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but also "
                                                          "specified a match string."),
        ([_component("user", 7, "x")], E.INVALID_REQUEST, "Unknown match type 7"),
        ([_component("ip", 2), _component("user", 0)], E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but "
                                                                          "set match string to null."),
        ([_component("ip", 2), _component("user", 2)], E.INVALID_REQUEST, "Invalid entity filter component "
         "combination. IP filter component should not be used with user or clientId filter component."),
    ]
    for components, code, message in cases:
        answer = _ask(server, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": False})
        assert (answer.error_code, answer.error_message, answer.entries) == (code, message, None), components


def test_describe_client_quotas_matches_as_kafka(server):
    """EXACT matches a name, DEFAULT the default entity, SPECIFIED any entity of the type, the default one too
    (klog left the default out); components combine as AND; strict leaves out entities with other parts."""
    n = f"w{_uid()}"
    user, client = f"{n}-u", f"{n}-c"
    entities = {(("user", user),): {"producer_byte_rate": 1024.0},
                (("client-id", client), ("user", user)): {"request_percentage": 50.0},
                (("client-id", client), ("user", None)): {"consumer_byte_rate": 2048.0}}
    got = _alter_quotas(server, *(_quota_entry(list(e), list(v.items())) for e, v in entities.items()))
    assert got == {(E.NONE, None, e) for e in entities}
    mine = set(entities)

    def quotas(components: list[dict[str, Any]], strict: bool = False) -> set[tuple[tuple[str, str | None], ...]]:
        return set(_quotas(server, components, strict)) & mine

    u_only, u_c, default_c = list(entities)
    until(lambda: quotas([]) == mine, "the quotas", timeout=30)
    assert quotas([_component("client-id", 0, client)]) == {u_c, default_c}
    assert quotas([_component("client-id", 0, client), _component("user", 2)]) == {u_c, default_c}
    assert quotas([_component("client-id", 0, client), _component("user", 2)], strict=True) == {u_c, default_c}
    assert quotas([_component("client-id", 0, client), _component("user", 1)]) == {default_c}
    assert quotas([_component("user", 0, user)]) == {u_only, u_c}
    assert quotas([_component("user", 0, user)], strict=True) == {u_only}
    assert quotas([_component("user", 0, user), _component("client-id", 0, f"{n}-zz")]) == set()
    assert quotas([_component("client-id", 0, client)], strict=True) == set()
    assert quotas([], strict=True) == set()
    assert quotas([]) == mine
    _alter_quotas(server, *(_quota_entry(list(e), [(k, None) for k in v]) for e, v in entities.items()))
    until(lambda: quotas([]) == set(), "the quotas removed", timeout=30)


def test_alter_client_quotas_checks_an_entity_in_kafkas_map_order(server):
    """Kafka checks (and answers) an entity's parts in the order of its HashMap, sized by the request's entity
    list: an empty name before an unhandled type when the map puts it first, an empty IP before its form; an IP
    entity may be a resolvable host name; a long quota of 2^63 - 1 (2^63 as a double) is not too large."""
    n = f"k{_uid()}"

    def raw(entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]) -> list[tuple[Any, ...]]:
        answer = _ask(server, ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [_quota_entry(entity, ops)],
                                                               "validate_only": True})
        return [(r.error_code, r.error_message, [(e.entity_type, e.entity_name) for e in r.entity])
                for r in answer.entries]

    assert raw([("foo", ""), ("user", "")], [("producer_byte_rate", 5.0)]) == [
        (E.INVALID_REQUEST, "Empty user not supported", [("user", ""), ("foo", "")])]
    assert raw([("user", n), ("client-id", n)], [("producer_byte_rate", 5.0)]) == [
        (E.NONE, None, [("client-id", n), ("user", n)])]
    assert raw([("ip", "")], [("connection_creation_rate", 5.0)]) == [
        (E.INVALID_REQUEST, "Empty ip not supported", [("ip", "")])]
    assert raw([("ip", "localhost")], [("connection_creation_rate", 5.0)]) == [(E.NONE, None, [("ip", "localhost")])]
    assert raw([("user", n)], [("producer_byte_rate", float(2 ** 63 - 1))]) == [(E.NONE, None, [("user", n)])]
    assert raw([("user", n)], [("producer_byte_rate", float("inf"))]) == [
        (E.INVALID_REQUEST, "Proposed value for producer_byte_rate is too large for a LONG.", [("user", n)])]


def _new_topic(server: dict[str, str]) -> tuple[str, uuid.UUID]:
    """A one-partition topic made by the super user, once its leader is known: (name, id)."""
    name = f"ids-{_uid()}"
    created = _ask(server, ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 30000, "validate_only": False})
    assert created.topics[0].error_code == E.NONE, created

    def described() -> Any:
        topic = _ask(server, ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}).topics[0]
        return topic if topic.error_code == E.NONE and topic.partitions and topic.partitions[0].leader_id >= 0 \
            else None

    return name, until(described, f"topic {name} and its leader", timeout=30).topic_id


def test_metadata_by_the_id_of_a_topic_not_describable_answers_topic_authorization_failed(server):
    """Metadata v12+ asking by id for a topic the principal may not describe: TOPIC_AUTHORIZATION_FAILED, its name
    still hidden. (klog answered UNKNOWN_TOPIC_ID.)"""
    _, topic_id = _new_topic(server)
    for version in (12, 13):
        [topic] = _ask(server, ApiKey.METADATA, version, {"topics": [{"name": None, "topic_id": topic_id}],
                                                          "allow_auto_topic_creation": False,
                                                          "include_topic_authorized_operations": False},
                       user="alice").topics
        assert (topic.error_code, topic.name, topic.topic_id, topic.partitions) == \
            (E.TOPIC_AUTHORIZATION_FAILED, None, topic_id, []), version


def test_metadata_v10_and_v11_naming_a_topic_by_id_alone_are_invalid_requests(server):
    """Metadata v10 and v11 carry a topic id field, but Kafka takes topics by id only from v12: a request naming
    one by id alone is answered as a failed request, every topic INVALID_REQUEST, no brokers, no cluster id, no
    controller. (klog served the id at v10 and closed the connection at v11.)"""
    name, topic_id = _new_topic(server)
    for version in (10, 11):
        answer = _ask(server, ApiKey.METADATA, version, {"topics": [
            {"name": name, "topic_id": uuid.UUID(int=0)}, {"name": None, "topic_id": topic_id}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert (answer.brokers, answer.cluster_id, answer.controller_id) == ([], None, -1), version
        assert [(t.error_code, t.name, t.partitions) for t in answer.topics] == \
            [(E.INVALID_REQUEST, name, []), (E.INVALID_REQUEST, "", [])], version


def test_delete_topics_refusals_carry_kafkas_messages(server):
    """DeleteTopics refused for lack of Delete answers Kafka's message for the code, by name (v5, v6) and by id
    (v6); an unknown id answers Kafka's UNKNOWN_TOPIC_ID message. (klog answered no message, and "Unknown topic
    id".)"""
    name, topic_id = _new_topic(server)
    denied = "Topic authorization failed."
    by_id = _ask(server, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": topic_id}],
                                                   "timeout_ms": 5000}, user="alice").responses
    assert [(t.name, t.topic_id, t.error_code, t.error_message) for t in by_id] == \
        [(None, topic_id, E.TOPIC_AUTHORIZATION_FAILED, denied)]
    by_name = _ask(server, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)},
                                                                {"name": "never-made", "topic_id": uuid.UUID(int=0)}],
                                                     "timeout_ms": 5000}, user="alice").responses
    assert {(t.name, t.error_code, t.error_message) for t in by_name} == {   # in Kafka's hash order
        (name, E.TOPIC_AUTHORIZATION_FAILED, denied), ("never-made", E.TOPIC_AUTHORIZATION_FAILED, denied)}
    v5 = _ask(server, ApiKey.DELETE_TOPICS, 5, {"topic_names": [name], "timeout_ms": 5000}, user="alice").responses
    assert [(t.name, t.error_code, t.error_message) for t in v5] == [(name, E.TOPIC_AUTHORIZATION_FAILED, denied)]
    unknown = uuid.uuid4()
    gone = _ask(server, ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": unknown}],
                                                  "timeout_ms": 5000}).responses
    assert [(t.name, t.topic_id, t.error_code, t.error_message) for t in gone] == \
        [(None, unknown, E.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")]


# ------------------------------------------------------------------------------------------- delegation tokens

def test_token_requests_without_a_secret_key_as_kafka(server):
    """No delegation.token.secret.key: Kafka's broker still refuses a renewer that is not a User first
    (INVALID_PRINCIPAL_TYPE, times -1; klog answered DELEGATION_TOKEN_AUTH_DISABLED), then its controller answers
    DELEGATION_TOKEN_AUTH_DISABLED with its responses' default times 0 (klog answered -1); DescribeDelegationToken
    is the broker's DELEGATION_TOKEN_AUTH_DISABLED."""
    from test_delegation_tokens_vs_kafka import create_token_body, created_fields

    group = _ask(server, ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(renewers=(("Group", "g"),)),
                 user="alice")
    assert created_fields(group) == (E.INVALID_PRINCIPAL_TYPE, "User", "alice", "User", "alice", -1, -1, -1, "", b"")
    disabled = _ask(server, ApiKey.CREATE_DELEGATION_TOKEN, 3, create_token_body(), user="alice")
    assert created_fields(disabled) == (E.DELEGATION_TOKEN_AUTH_DISABLED, "User", "alice", "User", "alice", 0, 0, 0,
                                        "", b"")
    renewed = _ask(server, ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": b"x", "renew_period_ms": 1}, user="alice")
    assert (renewed.error_code, renewed.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)
    expired = _ask(server, ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": b"x", "expiry_time_period_ms": -1},
                   user="alice")
    assert (expired.error_code, expired.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)
    described = _ask(server, ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}, user="alice")
    assert (described.error_code, described.tokens) == (E.DELEGATION_TOKEN_AUTH_DISABLED, [])
