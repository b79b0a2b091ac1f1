"""SCRAM credentials (Kafka's ``ScramControlManager``): AlterUserScramCredentials decided on the committed image,
as ``UserScramCredentialRecord``/``RemoveUserScramCredentialRecord``; DescribeUserScramCredentials read from an
image (brokers answer it from theirs, as Kafka's do).

Pure: no IO; the caller commits the records (klog.controller.apis.ControllerApis).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from klog.controller.result import ControllerResult
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol.errors import ErrorCode
from klog.security.quotas import CLIENT_ID, IP, USER
from klog.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, credential_from_salted

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        AlterUserScramCredentialsRequestScramCredentialDeletion,
        AlterUserScramCredentialsRequestScramCredentialUpsertion,
        AlterUserScramCredentialsResponseResult,
        DescribeClientQuotasRequestComponentData,
        DescribeClientQuotasResponse,
        DescribeClientQuotasResponseEntryData,
        DescribeUserScramCredentialsResponse,
        DescribeUserScramCredentialsResponseCredentialInfo,
        DescribeUserScramCredentialsResponseResult,
    )

__all__ = ["alter_user_scram_credentials", "describe_user_scram_credentials"]

NONE = ErrorCode.NONE


def _result(user: str, code: int = NONE, message: str | None = None) -> AlterUserScramCredentialsResponseResult:
    return {"user": user, "error_code": code, "error_message": message}


def alter_user_scram_credentials(deletions: list[AlterUserScramCredentialsRequestScramCredentialDeletion],
                                 upsertions: list[AlterUserScramCredentialsRequestScramCredentialUpsertion],
                                 image: MetadataImage
                                 ) -> ControllerResult[list[AlterUserScramCredentialsResponseResult]]:
    """One result per user named, as Kafka's: the users deleting, then those upserting, then those refused
    (each group in first-seen order; Kafka's, in its hash maps' order); a user with any bad item changes
    nothing."""
    order: list[str] = []
    errors: dict[str, tuple[int, str | None]] = {}
    records: dict[str, list[MetadataRecord]] = {}
    # One alteration per user and request, as Kafka's: a user named again (by another mechanism, or by a
    # deletion and an upsertion) after a valid item fails whole; after an invalid one, the first error stands.
    altered: set[str] = set()
    # (the item, the same item when it is an upsertion)
    items: list[tuple[AlterUserScramCredentialsRequestScramCredentialDeletion,
                      AlterUserScramCredentialsRequestScramCredentialUpsertion | None]] = [
        *((d, None) for d in deletions), *((u, u) for u in upsertions)]
    for item, upsertion in items:
        user, mechanism = item.name, int(item.mechanism)
        if user not in order:
            order.append(user)
        if user in errors:
            continue
        if user in altered:
            errors[user] = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same "
                                                          "request")
            continue
        altered.add(user)
        if not user:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            continue
        if mechanism not in MECHANISMS:
            errors[user] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            continue
        if upsertion is None:
            if (user, mechanism) not in image.scram_credentials:
                errors[user] = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not "
                                                              "exist")
                continue
            records.setdefault(user, []).append(record("RemoveUserScramCredentialRecord", name=user,
                                                       mechanism=mechanism))
            continue
        iterations = int(upsertion.iterations)
        if iterations < MIN_ITERATIONS:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            continue
        if iterations > MAX_ITERATIONS:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            continue
        salt, salted = bytes(upsertion.salt or b""), bytes(upsertion.salted_password or b"")
        if not salted:   # Kafka's HMAC refuses an empty key (an empty salt is stored as it is)
            errors[user] = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
            continue
        credential = credential_from_salted(MECHANISMS[mechanism][0], salted, salt, iterations)
        records.setdefault(user, []).append(record(
            "UserScramCredentialRecord", name=user, mechanism=mechanism, salt=credential.salt,
            stored_key=credential.stored_key, server_key=credential.server_key, iterations=iterations))
    out: list[MetadataRecord] = []
    response: list[AlterUserScramCredentialsResponseResult] = []
    deleting = {d.name for d in deletions}
    for user in sorted((u for u in order if u not in errors), key=lambda u: u not in deleting):
        out += records.get(user, [])
        response.append(_result(user))
    response += [_result(user, *errors[user]) for user in order if user in errors]
    return ControllerResult(out, response)


def describe_user_scram_credentials(users: list[str] | None, image: MetadataImage
                                    ) -> DescribeUserScramCredentialsResponse:
    """DescribeUserScramCredentials' response body (``users`` None or empty: every user with a credential)."""
    by_user: dict[str, list[DescribeUserScramCredentialsResponseCredentialInfo]] = {}
    for (user, mechanism), credential in sorted(image.scram_credentials.items()):
        by_user.setdefault(user, []).append({"mechanism": mechanism, "iterations": credential.iterations})
    results: list[DescribeUserScramCredentialsResponseResult] = []
    if not users:
        for user, infos in by_user.items():
            results.append({**_result(user, NONE, ""), "credential_infos": infos})
    else:
        counts: dict[str, int] = {}
        for user in users:
            counts[user] = counts.get(user, 0) + 1
        for user in dict.fromkeys(users):
            if counts[user] > 1:
                results.append({**_result(user, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials "
                                          f"for the same user twice in a single request: {user}"),
                                "credential_infos": []})
            elif user not in by_user:
                results.append({**_result(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user "
                                          f"credential that does not exist: {user}"), "credential_infos": []})
            else:
                results.append({**_result(user, NONE, ""), "credential_infos": by_user[user]})
    # Kafka's default messages: empty, not null
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": "", "results": results}


#: DescribeClientQuotas' match types (Kafka's ClientQuotaFilterComponent)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def describe_client_quotas(components: list[DescribeClientQuotasRequestComponentData], strict: bool, image: MetadataImage
                           ) -> DescribeClientQuotasResponse:
    """DescribeClientQuotas' response body over the image's ClientQuotaRecords (Kafka's
    ``ClientQuotasImage.describe``). A component matches an entity's part of its type by name (EXACT), the
    default entity (DEFAULT) or any, the default too (SPECIFIED); ``strict``: the entity has no other parts. A
    filter Kafka refuses: its error code and message, no entries."""
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in components:
        problem = _component_problem(c, wanted)
        if problem is not None:
            return {"throttle_time_ms": 0, "error_code": problem[0], "error_message": problem[1], "entries": None}
        wanted[c.entity_type] = (int(c.match_type), c.match)
    if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "entries": None,
                "error_message": "Invalid entity filter component combination. IP filter component should not be "
                                 "used with user or clientId filter component."}
    entries: list[DescribeClientQuotasResponseEntryData] = []
    for entity, values in sorted(image.client_quotas.items(), key=lambda kv: repr(kv[0])):
        parts = dict(entity)
        if strict and set(parts) != set(wanted):
            continue
        ok = True
        for entity_type, (match_type, name) in wanted.items():
            if entity_type not in parts:
                ok = False
            elif match_type == MATCH_EXACT:
                ok = ok and parts[entity_type] == name
            elif match_type == MATCH_DEFAULT:
                ok = ok and parts[entity_type] is None
        if ok and values:
            entries.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                            "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": "", "entries": entries}


def _component_problem(c: DescribeClientQuotasRequestComponentData, seen: dict[str, tuple[int, str | None]]
                       ) -> tuple[int, str] | None:
    """Why Kafka refuses a DescribeClientQuotas filter component (checked in its order), None when usable."""
    if not c.entity_type:
        return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
    if c.entity_type in seen:
        return ErrorCode.INVALID_REQUEST, f"Entity type {c.entity_type} cannot appear more than once in the filter."
    if c.entity_type not in (USER, CLIENT_ID, IP):
        return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}"
    if c.match_type == MATCH_EXACT and c.match is None:
        return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
    if c.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and c.match is not None:
        name = "DEFAULT" if c.match_type == MATCH_DEFAULT else "SPECIFIED"
        return ErrorCode.INVALID_REQUEST, f"Request specified MATCH_TYPE_{name}, but also specified a match string."
    if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
        return ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}"
    return None
