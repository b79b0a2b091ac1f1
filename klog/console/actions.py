"""The console's write actions, as operators have them in Redpanda Console and Kafbat UI: create and delete
topics, set or reset a topic config, add partitions, produce a message, delete records below an offset, reset
an empty group's committed offsets; create and delete ACLs, set and delete SCRAM credentials, set and remove client
quotas.

Each action is two POSTs: the first (the form on a page) returns a :class:`Plan`, a page saying what will change,
with a confirm button; the second (``confirm=yes``) runs it. Input errors are :class:`BadRequest`; the cluster's
refusals are ``KafkaError`` and are shown with Kafka's error name and message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from klog.console.data import DEFAULT_ENTITY, ClusterView
from klog.security.scram import MECHANISMS


class BadRequest(ValueError):
    """A form field is wrong: answered 400 with the message."""


@dataclasses.dataclass
class Plan:
    """What an action will do (the confirmation page), and how to do it."""

    title: str
    #: the confirm button's text
    verb: str
    #: where "cancel" leads, and where the browser goes when done (unless ``after`` says otherwise)
    back: str
    #: does it; returns the notice shown on the next page
    run: Callable[[], str]
    details: list[str] = dataclasses.field(default_factory=list)
    #: a table of (topic, partition, from, to) the action changes
    table_header: tuple[str, ...] = ()
    table: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    #: it destroys data: the button is red
    destructive: bool = False
    after: str | None = None
    #: form fields the confirmation page must not carry (a password): the server keeps them until the confirm
    secret_fields: tuple[str, ...] = ()


def _field(form: dict[str, str], name: str) -> str:
    return form.get(name, "").strip()


def int_param(params: dict[str, str], name: str, default: int | None, lo: int = 0) -> int | None:
    """An integer query or form field (``default`` when blank), at least ``lo``."""
    raw = params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
    if value < lo:
        raise BadRequest(f"{name} must be at least {lo}, got {value}")
    return value


def _int_field(form: dict[str, str], name: str, *, lo: int, default: int | None = None) -> int:
    value = int_param(form, name, default, lo)
    if value is None:
        raise BadRequest(f"{name} is required")
    return value


def _key_values(text: str, what: str) -> dict[str, str]:
    """``key=value`` lines (blank lines skipped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadRequest(f"{what}: expected key=value, got {line.strip()!r}")
        out[key.strip()] = value.strip()
    return out


def _topic_url(topic: str) -> str:
    import urllib.parse

    return "/topics/" + urllib.parse.quote(topic, safe="")


def _partition(view: ClusterView, topic: str, form: dict[str, str]) -> int:
    partition = _int_field(form, "partition", lo=0)
    count = view.partition_count(topic)
    if partition >= count:
        raise BadRequest(f"topic {topic!r} has no partition {partition} (it has {count})")
    return partition


# ---- topics --------------------------------------------------------------------------------------------------

def create_topic(view: ClusterView, form: dict[str, str]) -> Plan:
    from klog.client.admin import NewTopic

    name = _field(form, "name")
    if not name:
        raise BadRequest("the topic needs a name")
    partitions = _int_field(form, "partitions", lo=1, default=1)
    replication = _int_field(form, "replication_factor", lo=-1, default=-1)
    if replication == 0:
        raise BadRequest("replication factor must be at least 1 (or -1 for the broker's default)")
    configs = _key_values(form.get("configs", ""), "configs")

    def run() -> str:
        view.admin.create_topics([NewTopic(name, partitions, replication, configs)])
        return f"Created topic {name}."

    return Plan(f"Create topic {name}", "Create topic", "/topics", run, after=_topic_url(name), details=[
        f"{partitions} partition{'s' if partitions != 1 else ''}, replication factor "
        f"{replication if replication > 0 else 'the broker default'}",
        *(f"{k} = {v}" for k, v in configs.items())])


def delete_topic(view: ClusterView, topic: str, form: dict[str, str]) -> Plan:
    def run() -> str:
        view.admin.delete_topics([topic])
        return f"Deleted topic {topic}."

    return Plan(f"Delete topic {topic}", "Delete topic", _topic_url(topic), run, destructive=True, after="/topics",
                details=["The topic, all its partitions and records are deleted. This cannot be undone."])


def alter_topic_config(view: ClusterView, topic: str, form: dict[str, str]) -> Plan:
    from klog.client.admin import ConfigResource

    name = _field(form, "config")
    if not name:
        raise BadRequest("name the config to change")
    value: str | None = None if form.get("reset") else form.get("value", "")

    def run() -> str:
        view.admin.alter_configs({ConfigResource("topic", topic): {name: value}})
        return f"{name} of {topic} " + ("reset to its default." if value is None else f"set to {value}.")

    change = f"reset {name} to the broker's default" if value is None else f"set {name} = {value}"
    return Plan(f"Change a config of topic {topic}", "Apply", _topic_url(topic), run, details=[change])


def add_partitions(view: ClusterView, topic: str, form: dict[str, str]) -> Plan:
    current = view.partition_count(topic)
    count = _int_field(form, "count", lo=1)
    if count <= current:
        raise BadRequest(f"topic {topic!r} has {current} partitions: the new count must be larger")

    def run() -> str:
        view.admin.create_partitions({topic: count})
        return f"Topic {topic} has {count} partitions."

    return Plan(f"Add partitions to topic {topic}", "Add partitions", _topic_url(topic), run, details=[
        f"from {current} to {count} partitions ({count - current} new)",
        "Keyed records may go to another partition than before: the partitioner hashes over the new count."])


def produce(view: ClusterView, topic: str, form: dict[str, str]) -> Plan:
    partition = _partition(view, topic, form) if _field(form, "partition") else None
    key = form.get("key", "")
    value = form.get("value", "")
    headers = _key_values(form.get("headers", ""), "headers")

    def run() -> str:
        meta = view.produce(topic, partition=partition, key=key.encode() if key else None, value=value.encode(),
                            headers=[(k, v.encode()) for k, v in headers.items()])
        return f"Produced a message to {topic}-{meta.partition} at offset {meta.offset}."

    where = f"partition {partition}" if partition is not None else "the partition the key hashes to"
    return Plan(f"Produce a message to {topic}", "Produce", _topic_url(topic), run, details=[
        f"to {where}", f"key: {key if key else '(none)'}", f"value: {value}",
        *(f"header {k}: {v}" for k, v in headers.items())])


def delete_records(view: ClusterView, topic: str, form: dict[str, str]) -> Plan:
    from klog.client import TopicPartition

    partition = _partition(view, topic, form)
    start, end = view.offsets([(topic, partition)])[(topic, partition)]
    before = _int_field(form, "offset", lo=0, default=end)
    if before > end:
        raise BadRequest(f"{topic}-{partition} ends at offset {end}: records can be deleted up to it, not {before}")

    def run() -> str:
        low = view.admin.delete_records({TopicPartition(topic, partition): before})
        return f"Deleted the records of {topic}-{partition} below offset {low[TopicPartition(topic, partition)]}."

    return Plan(f"Delete records of {topic}-{partition}", "Delete records", _topic_url(topic), run,
                destructive=True, details=[
                    f"Records below offset {before} are deleted ({max(0, before - start)} records); "
                    "consumers starting from the beginning start there."],
                table_header=("topic", "partition", "log start offset", "new log start offset"),
                table=[(topic, partition, start, max(start, before))])


# ---- groups --------------------------------------------------------------------------------------------------

RESET_TARGETS = ("earliest", "latest", "offset")


def reset_group_offsets(view: ClusterView, group: str, form: dict[str, str]) -> Plan:
    """Kafka's rule (kafka-consumer-groups --reset-offsets): only a group without members; a target outside the
    partition's [log start, log end] is moved inside it."""
    from klog.client import TopicPartition

    to = _field(form, "to")
    if to not in RESET_TARGETS:
        raise BadRequest(f"reset to must be one of {', '.join(RESET_TARGETS)}, got {to!r}")
    offset = _int_field(form, "offset", lo=0) if to == "offset" else 0
    topic = _field(form, "topic")
    described = view.describe_group(group)
    if described is not None and described.members:
        raise BadRequest(f"Offsets can only be reset if the group {group!r} is inactive, but the current state is "
                         f"{described.state} ({len(described.members)} members): stop its consumers first.")
    committed = view.admin.list_group_offsets(group)
    if topic:
        partitions = [(topic, p) for p in range(view.partition_count(topic))]
    else:
        partitions = view.existing(sorted((tp.topic, tp.partition) for tp in committed))
    if not partitions:
        raise BadRequest(f"group {group!r} has no committed offsets: name the topic to reset")
    bounds = view.offsets(partitions)
    target = {}
    for tp in partitions:
        start, end = bounds[tp]
        wanted = start if to == "earliest" else end if to == "latest" else offset
        target[tp] = min(max(wanted, start), end)
    current = {(tp.topic, tp.partition): om.offset for tp, om in committed.items()}

    def run() -> str:
        view.admin.alter_group_offsets(group, {TopicPartition(*tp): o for tp, o in target.items()})
        return f"Reset the offsets of group {group} on {len(target)} partitions."

    import urllib.parse

    return Plan(f"Reset offsets of group {group}", "Reset offsets", "/groups/" + urllib.parse.quote(group, safe=""),
                run, details=[f"to the {to if to != 'offset' else f'offset {offset}'} "
                              "(clamped to each partition's log start and end)"],
                table_header=("topic", "partition", "committed offset", "new committed offset"),
                table=[(t, p, current.get((t, p), "-"), o) for (t, p), o in sorted(target.items())])


# ---- ACLs, SCRAM credentials, client quotas ---------------------------------------------------------------------

#: the choices of the security pages' forms (their templates list these; the planners accept only these)
ACL_RESOURCE_TYPES = ("topic", "group", "cluster", "transactional_id", "delegation_token", "user")
ACL_OPERATIONS = ("read", "write", "create", "delete", "alter", "describe", "describe_configs", "alter_configs",
                  "idempotent_write", "cluster_action", "create_tokens", "describe_tokens", "all")
ACL_PATTERNS = ("literal", "prefixed")
SCRAM_MECHANISMS = tuple(name for name, _hash in MECHANISMS.values())
QUOTA_ENTITY_TYPES = ("user", "client-id")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
FORM_CHOICES = {"acl_resource_types": ACL_RESOURCE_TYPES, "acl_operations": ACL_OPERATIONS,
                "acl_patterns": ACL_PATTERNS, "scram_mechanisms": SCRAM_MECHANISMS,
                "quota_entity_types": QUOTA_ENTITY_TYPES, "quota_keys": QUOTA_KEYS}


def _choice(form: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = _field(form, name)
    if value not in choices:
        raise BadRequest(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _acl(form: dict[str, str]) -> Any:
    from klog.client.admin import AclBinding

    resource_type = _choice(form, "resource_type", ACL_RESOURCE_TYPES)
    name = "kafka-cluster" if resource_type == "cluster" else _field(form, "resource_name")
    if not name:
        raise BadRequest("name the resource (a topic, group, transactional id... or * for all)")
    principal = _field(form, "principal")
    if ":" not in principal:
        raise BadRequest(f"principal must be TYPE:NAME, e.g. User:alice, got {principal!r}")
    return AclBinding(resource_type, name, principal, _choice(form, "operation", ACL_OPERATIONS),
                      _choice(form, "permission", ("allow", "deny")), _field(form, "host") or "*",
                      _choice(form, "pattern_type", ACL_PATTERNS))


def _acl_text(acl: Any) -> str:
    return (f"{acl.permission_type} {acl.principal} from host {acl.host}: {acl.operation} on {acl.resource_type} "
            f"{acl.resource_name} ({acl.pattern_type})")


def create_acl(view: ClusterView, form: dict[str, str]) -> Plan:
    acl = _acl(form)

    def run() -> str:
        view.admin.create_acls([acl])
        return f"Created the ACL: {_acl_text(acl)}."

    return Plan("Create an ACL", "Create ACL", "/acls", run, details=[_acl_text(acl)])


def delete_acl(view: ClusterView, form: dict[str, str]) -> Plan:
    from klog.client.admin import AclBindingFilter

    acl = _acl(form)
    exact = AclBindingFilter(acl.resource_type, acl.resource_name, acl.principal, acl.operation,
                             acl.permission_type, acl.host, acl.pattern_type)

    def run() -> str:
        deleted = view.admin.delete_acls([exact])
        return f"Deleted {len(deleted)} ACL{'s' if len(deleted) != 1 else ''}: {_acl_text(acl)}."

    return Plan("Delete an ACL", "Delete ACL", "/acls", run, destructive=True, details=[_acl_text(acl)])


def set_scram_password(view: ClusterView, form: dict[str, str]) -> Plan:
    from klog.client.admin import UserScramCredentialUpsertion
    from klog.security.scram import MAX_ITERATIONS, MIN_ITERATIONS

    user = _field(form, "user")
    if not user:
        raise BadRequest("name the user")
    mechanism = _choice(form, "mechanism", SCRAM_MECHANISMS)
    password = form.get("password", "")
    if not password:
        raise BadRequest("the password is empty")
    iterations = _int_field(form, "iterations", lo=MIN_ITERATIONS, default=MIN_ITERATIONS)
    if iterations > MAX_ITERATIONS:
        raise BadRequest(f"iterations must be at most {MAX_ITERATIONS}, got {iterations}")

    def run() -> str:
        view.admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, mechanism, password,
                                                                              iterations)])
        return f"Set the {mechanism} password of {user}."

    return Plan(f"Set the password of {user}", "Set password", "/users", run, secret_fields=("password",), details=[
        f"{mechanism} credential, {iterations} iterations (salted here; the password itself is not sent)",
        "A user logged in with the old password stays logged in until their connections close."])


def delete_scram_credential(view: ClusterView, form: dict[str, str]) -> Plan:
    user = _field(form, "user")
    if not user:
        raise BadRequest("name the user")
    mechanism = _choice(form, "mechanism", SCRAM_MECHANISMS)

    def run() -> str:
        view.admin.alter_user_scram_credentials(deletions=[(user, mechanism)])
        return f"Deleted the {mechanism} credential of {user}."

    return Plan(f"Delete the {mechanism} credential of {user}", "Delete credential", "/users", run,
                destructive=True, details=[f"{user} can no longer log in with {mechanism}."])


def _quota_entity(form: dict[str, str]) -> dict[str, str | None]:
    """``entity``: ``type=name`` pairs separated by commas (``<default>`` the default entity), as the quotas page
    shows them; or the fields ``entity_type`` and ``entity_name`` (blank: the default)."""
    text = _field(form, "entity")
    if not text:
        name = _field(form, "entity_name")
        return {_choice(form, "entity_type", QUOTA_ENTITY_TYPES): name or None}
    entity: dict[str, str | None] = {}
    for part in text.split(","):
        kind, sep, name = part.strip().partition("=")
        if not sep or kind not in (*QUOTA_ENTITY_TYPES, "ip"):
            raise BadRequest(f"entity must be type=name pairs (user, client-id, ip), got {text!r}")
        entity[kind] = None if name == DEFAULT_ENTITY else name
    return entity


def _entity_text(entity: dict[str, str | None]) -> str:
    return ", ".join(f"{k}={DEFAULT_ENTITY if v is None else v}" for k, v in entity.items())


def set_quota(view: ClusterView, form: dict[str, str]) -> Plan:
    entity = _quota_entity(form)
    key = _choice(form, "key", QUOTA_KEYS)
    raw = _field(form, "value")
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"value must be a number, got {raw!r}") from None
    if value < 0:
        raise BadRequest(f"value must not be negative, got {raw}")

    def run() -> str:
        view.admin.alter_client_quotas([(entity, {key: value})])
        return f"Set {key} = {raw} for {_entity_text(entity)}."

    return Plan(f"Set a quota of {_entity_text(entity)}", "Set quota", "/quotas", run,
                details=[f"{key} = {raw}"])


def remove_quota(view: ClusterView, form: dict[str, str]) -> Plan:
    entity = _quota_entity(form)
    key = _choice(form, "key", QUOTA_KEYS)

    def run() -> str:
        view.admin.alter_client_quotas([(entity, {key: None})])
        return f"Removed {key} of {_entity_text(entity)}."

    return Plan(f"Remove a quota of {_entity_text(entity)}", "Remove quota", "/quotas", run, destructive=True,
                details=[f"{key} of {_entity_text(entity)} is removed (the default applies again, if any)."])


#: POST routes of the security pages: path -> planner
SECURITY_ACTIONS: dict[tuple[str, ...], Callable[[ClusterView, dict[str, str]], Plan]] = {
    ("acls",): create_acl, ("acls", "delete"): delete_acl,
    ("users",): set_scram_password, ("users", "delete"): delete_scram_credential,
    ("quotas",): set_quota, ("quotas", "delete"): remove_quota,
}


#: POST routes: (path shape) -> planner. ``{}`` is the topic or group in the path.
TOPIC_ACTIONS: dict[str, Callable[[ClusterView, str, dict[str, str]], Plan]] = {
    "delete": delete_topic, "configs": alter_topic_config, "partitions": add_partitions, "produce": produce,
    "delete-records": delete_records,
}


def plan(view: ClusterView, parts: list[str], form: dict[str, str]) -> Plan | None:
    """The action a POST to ``/parts...`` asks for, planned (None: no such action)."""
    if parts == ["topics"]:
        return create_topic(view, form)
    if len(parts) == 3 and parts[0] == "topics" and parts[2] in TOPIC_ACTIONS:
        return TOPIC_ACTIONS[parts[2]](view, parts[1], form)
    if len(parts) == 3 and parts[0] == "groups" and parts[2] == "reset-offsets":
        return reset_group_offsets(view, parts[1], form)
    if tuple(parts) in SECURITY_ACTIONS:
        return SECURITY_ACTIONS[tuple(parts)](view, form)
    return None
