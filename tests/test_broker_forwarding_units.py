"""The pure part of forwarding controller requests (klog.broker.forwarding): which answers mean "the controller
moved, send it again" and how long a request is retried."""

from __future__ import annotations

import uuid
from types import SimpleNamespace as NS

import pytest

from klog.broker.forwarding import (
    DEFAULT_FORWARD_TIMEOUT_MS,
    FORWARDED_APIS,
    MAX_FORWARD_TIMEOUT_MS,
    NOT_CONTROLLER,
    controller_moved,
    forward_timeout_ms,
    item_error_codes,
)
from klog.protocol import decode_response, encode_response
from klog.protocol.errors import ErrorCode


def _answer(api_key: int, codes: list[int]) -> dict:
    items: list = [{"error_code": c} for c in codes]
    for step in reversed(FORWARDED_APIS[api_key][1][1:]):   # ElectLeaders: results per partition per topic
        items = [{step: items}]
    return {FORWARDED_APIS[api_key][1][0]: items}


@pytest.mark.parametrize("api_key", sorted(k for k, (_, path) in FORWARDED_APIS.items() if path))
def test_only_an_answer_of_not_controller_on_every_item_is_sent_again(api_key: int) -> None:
    assert controller_moved(api_key, _answer(api_key, [NOT_CONTROLLER, NOT_CONTROLLER]))
    assert not controller_moved(api_key, _answer(api_key, [NOT_CONTROLLER, 0]))   # something was decided
    assert not controller_moved(api_key, _answer(api_key, [36]))
    assert not controller_moved(api_key, _answer(api_key, []))


def test_list_partition_reassignments_is_sent_again_on_its_top_level_not_controller() -> None:
    assert controller_moved(46, {"error_code": NOT_CONTROLLER, "topics": []})
    assert not controller_moved(46, {"error_code": 0, "topics": []})


@pytest.mark.parametrize("api_key", [80, 81])
def test_a_voter_change_answered_by_a_voter_that_does_not_lead_is_sent_again(api_key: int) -> None:
    """AddRaftVoter/RemoveRaftVoter are the Raft leader's to decide: a voter that gave up the lead (it removed
    itself) answers NOT_LEADER_OR_FOLLOWER until the broker learns the new leader, and decided nothing."""
    assert controller_moved(api_key, {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "error_message": "moved"})
    assert controller_moved(api_key, {"error_code": NOT_CONTROLLER, "error_message": None})
    assert not controller_moved(api_key, {"error_code": ErrorCode.VOTER_NOT_FOUND, "error_message": None})
    # the active controller's APIs: NOT_LEADER_OR_FOLLOWER is an answer of its own (a partition's)
    assert not controller_moved(64, {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER})


def test_error_codes_are_read_from_decoded_responses_too() -> None:
    frame = b"".join(encode_response(19, 7, 5, {"throttle_time_ms": 0, "topics": [
        {"name": "t", "topic_id": uuid.UUID(int=0), "error_code": NOT_CONTROLLER, "error_message": "moved",
         "num_partitions": -1, "replication_factor": -1, "configs": None}]}))[4:]
    _, decoded = decode_response(19, 7, frame)
    assert item_error_codes(19, decoded) == [NOT_CONTROLLER] and controller_moved(19, decoded)


def test_elect_leaders_items_are_its_partitions() -> None:
    answer = {"error_code": 0, "replica_election_results": [
        {"topic": "a", "partition_result": [{"error_code": NOT_CONTROLLER}, {"error_code": NOT_CONTROLLER}]},
        {"topic": "b", "partition_result": [{"error_code": 84}]}]}
    assert item_error_codes(43, answer) == [NOT_CONTROLLER, NOT_CONTROLLER, 84]
    assert not controller_moved(43, answer)
    assert not controller_moved(43, {"error_code": 0, "replica_election_results": []})


def test_the_requests_timeout_bounds_the_retries() -> None:
    assert forward_timeout_ms(NS(timeout_ms=5000)) == 5000
    assert forward_timeout_ms(NS(timeout_ms=-1)) == 0   # one try
    assert forward_timeout_ms(NS(timeout_ms=10**9)) == MAX_FORWARD_TIMEOUT_MS
    assert forward_timeout_ms(NS(resources=[])) == DEFAULT_FORWARD_TIMEOUT_MS   # AlterConfigs has none
    assert forward_timeout_ms({"timeout_ms": 7}) == 7
