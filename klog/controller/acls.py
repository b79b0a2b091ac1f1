"""ACL changes as records: CreateAcls (30) and DeleteAcls (31), Kafka's ``AclControlManager``, pure.

A new ACL becomes an AccessControlEntryRecord with a fresh id (an ACL already stored, or given twice in one
request, succeeds without a second record); DeleteAcls removes every stored ACL a filter matches with a
RemoveAccessControlEntryRecord (once, whatever the number of filters matching it) and reports each match. A
request is committed atomically. DescribeAcls is answered by brokers from their image (:func:`describe_acls`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Union

from klog.metadata.image import AclEntry, MetadataImage
from klog.metadata.records import MAX_RECORDS_PER_BATCH, MetadataRecord, record
from klog.protocol.errors import ErrorCode
from klog.security.acl import AclFilter, create_error, filter_error, is_filter_only

from .result import ControllerResult

if TYPE_CHECKING:
    from klog.protocol.message_types import (
        CreateAclsRequestAclCreation,
        CreateAclsResponseAclCreationResult,
        DeleteAclsRequestFilter,
        DeleteAclsResponseFilterResult,
        DeleteAclsResponseMatchingAcl,
        DescribeAclsRequest,
        DescribeAclsResponse,
        DescribeAclsResponseAclDescription,
        DescribeAclsResponseResource,
    )

__all__ = ["DESCRIBE_ACLS_DISABLED", "MAX_NEW_ACLS_PER_REQUEST", "create_acls", "delete_acls", "describe_acls",
           "entry_of", "filter_of"]

#: Kafka's controller collects a request's new ACL records in a list bounded at 10,000 (max.records.per.user.op);
#: a request creating more is refused whole, every binding answering POLICY_VIOLATION, nothing stored.
MAX_NEW_ACLS_PER_REQUEST = MAX_RECORDS_PER_BATCH
NONE = ErrorCode.NONE
INVALID_REQUEST = ErrorCode.INVALID_REQUEST


def entry_of(creation: CreateAclsRequestAclCreation) -> AclEntry:
    """A CreateAcls creation as the entry it would store."""
    return AclEntry(int(creation.resource_type), creation.resource_name, int(creation.resource_pattern_type),
                    creation.principal, creation.host, int(creation.operation), int(creation.permission_type))


def filter_of(f: Union[DescribeAclsRequest, DeleteAclsRequestFilter]) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter as an :class:`AclFilter`."""
    return AclFilter(int(f.resource_type_filter), f.resource_name_filter, int(f.pattern_type_filter),
                     f.principal_filter, f.host_filter, int(f.operation), int(f.permission_type))


def create_acls(creations: Iterable[CreateAclsRequestAclCreation], image: MetadataImage
                ) -> ControllerResult[list[CreateAclsResponseAclCreationResult]]:
    """CreateAcls' results (error_code, error_message per creation) and the records of the new ACLs."""
    entries = [entry_of(creation) for creation in creations]
    if any(is_filter_only(entry) for entry in entries):
        # Kafka cannot build an AclBinding of an ANY/MATCH value and fails the whole request
        return ControllerResult((), [{"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": None}
                                     for _ in entries])
    existing = set(image.acls.values())
    taken = set(image.acls)
    records: list[MetadataRecord] = []
    results: list[CreateAclsResponseAclCreationResult] = []
    for entry in entries:
        problem = create_error(entry)
        if problem is not None:
            results.append({"error_code": problem[0], "error_message": problem[1]})
            continue
        if entry not in existing:
            existing.add(entry)
            acl_id = uuid.uuid4()
            while acl_id in taken:
                acl_id = uuid.uuid4()
            taken.add(acl_id)
            records.append(record("AccessControlEntryRecord", id=acl_id, resource_type=entry.resource_type,
                                  resource_name=entry.resource_name, pattern_type=entry.pattern_type,
                                  principal=entry.principal, host=entry.host, operation=entry.operation,
                                  permission_type=entry.permission_type))
        results.append({"error_code": NONE, "error_message": ""})   # Kafka's default message: empty, not null
    if len(records) > MAX_NEW_ACLS_PER_REQUEST:
        message = (f"Exceeded maximum of {MAX_NEW_ACLS_PER_REQUEST} new ACLs in one request: "
                   f"{len(records)} requested")
        return ControllerResult((), [{"error_code": ErrorCode.POLICY_VIOLATION, "error_message": message}
                                     for _ in results])
    return ControllerResult(records, results)


def _matching(entry: AclEntry) -> DeleteAclsResponseMatchingAcl:
    return {"error_code": NONE, "error_message": None, "resource_type": entry.resource_type,
            "resource_name": entry.resource_name, "pattern_type": entry.pattern_type, "principal": entry.principal,
            "host": entry.host, "operation": entry.operation, "permission_type": entry.permission_type}


def delete_acls(filters: Iterable[DeleteAclsRequestFilter], image: MetadataImage
                ) -> ControllerResult[list[DeleteAclsResponseFilterResult]]:
    """DeleteAcls' filter results (each with the ACLs it matched) and the records removing them."""
    removed: dict[uuid.UUID, None] = {}
    results: list[DeleteAclsResponseFilterResult] = []
    for f in filters:
        acl_filter = filter_of(f)
        problem = filter_error(acl_filter)
        if problem is not None:
            results.append({"error_code": INVALID_REQUEST, "error_message": problem, "matching_acls": []})
            continue
        matched: list[DeleteAclsResponseMatchingAcl] = []
        for acl_id, entry in image.acls.items():
            if acl_filter.matches(entry):
                matched.append(_matching(entry))
                removed[acl_id] = None
        results.append({"error_code": NONE, "error_message": None, "matching_acls": matched})
    records = [record("RemoveAccessControlEntryRecord", id=acl_id) for acl_id in removed]
    return ControllerResult(records, results)


#: DescribeAcls' answer without an authorizer (Kafka's AclApis.handleDescribeAcls, on a broker and a controller
#: alike; its other ACL APIs say "No Authorizer is configured.")
DESCRIBE_ACLS_DISABLED = "No Authorizer is configured on the broker"


def describe_acls(request: DescribeAclsRequest, acls: Mapping[uuid.UUID, AclEntry]) -> DescribeAclsResponse:
    """DescribeAcls' answer from an image's ACLs: the matching ACLs grouped by resource pattern (sorted; Kafka's
    order is its hash maps')."""
    acl_filter = filter_of(request)   # one with a code Kafka does not know matches nothing, as Kafka's
    grouped: dict[tuple[int, str, int], list[DescribeAclsResponseAclDescription]] = {}
    for entry in acls.values():
        if acl_filter.matches(entry):
            grouped.setdefault((entry.resource_type, entry.resource_name, entry.pattern_type), []).append(
                {"principal": entry.principal, "host": entry.host, "operation": entry.operation,
                 "permission_type": entry.permission_type})
    resources: list[DescribeAclsResponseResource] = [
        {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": items}
        for (rtype, name, ptype), items in sorted(grouped.items())]
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": "", "resources": resources}
