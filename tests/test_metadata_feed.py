"""The pure parts of the quorum's observers (klog.controller.metadata_feed): the bounded feed of committed entries a
member serves, and the observer exchange's frames."""

from __future__ import annotations

import re

import pytest

from klog.broker.config import BrokerConfig, ConfigError
from klog.controller.metadata_feed import (
    FeedEntry,
    FeedProtocolError,
    FeedRequest,
    FeedResponse,
    FeedSnapshot,
    MetadataFeed,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from klog.controller.observer import ObserverConfig
from klog.controller.quorum import QuorumConfigError


def _entry(index: int, size: int = 10, kind: str = "data") -> FeedEntry:
    return FeedEntry(index, 1, kind, bytes([index % 256]) * size)


def test_feed_serves_entries_after_an_index_within_a_byte_budget() -> None:
    feed = MetadataFeed(max_bytes=1000)
    for i in range(1, 6):
        feed.append(_entry(i))
    assert [e.index for e in feed.after(0, 1 << 20) or []] == [1, 2, 3, 4, 5]
    assert [e.index for e in feed.after(3, 1 << 20) or []] == [4, 5]
    assert [e.index for e in feed.after(0, 25) or []] == [1, 2]   # budget: whole entries only
    assert [e.index for e in feed.after(0, 1) or []] == [1]       # but at least one
    assert feed.after(5, 1 << 20) == []                           # caught up: wait for more
    assert feed.after(9, 1 << 20) == []                           # ahead of a lagging member: wait too


def test_feed_drops_its_oldest_entries_beyond_its_bound_and_then_asks_for_a_snapshot() -> None:
    feed = MetadataFeed(max_bytes=30)
    for i in range(1, 6):
        feed.append(_entry(i))
    assert feed.base_index == 2 and feed.last_index == 5
    assert feed.after(1, 1 << 20) is None                         # entry 2 is gone: a snapshot
    assert [e.index for e in feed.after(2, 1 << 20) or []] == [3, 4, 5]
    big = MetadataFeed(max_bytes=5)
    big.append(_entry(1, size=50))                                # the newest entry is always kept
    assert [e.index for e in big.after(0, 1) or []] == [1]


def test_feed_after_a_snapshot_serves_only_what_follows_it() -> None:
    feed = MetadataFeed(max_bytes=1000)
    for i in range(1, 6):
        feed.append(_entry(i))
    feed.compact_through(3)
    assert feed.after(2, 1 << 20) is None and [e.index for e in feed.after(3, 1 << 20) or []] == [4, 5]
    feed.reset(10)                                                # a snapshot from the leader replaced the log
    assert feed.after(5, 1 << 20) is None and feed.after(10, 1 << 20) == []
    feed.append(_entry(11))
    assert [e.index for e in feed.after(10, 1 << 20) or []] == [11]
    feed.append(_entry(20))                                       # a gap (a restart from a snapshot) resets
    assert feed.after(11, 1 << 20) is None and [e.index for e in feed.after(19, 1 << 20) or []] == [20]


def test_observer_frames_round_trip() -> None:
    req = FeedRequest(after_index=42, max_wait_ms=500, max_bytes=1 << 20)
    frame = encode_request(req)
    assert decode_request(frame[4:]) == req
    voters = ((1, "127.0.0.1", 9093), (2, "host-2.example", 19093))
    entries = FeedResponse(3, 7, voters, entries=(_entry(1), _entry(2, kind="leader_change"), _entry(3, kind="conf_change")))
    snapshot = FeedResponse(3, 7, voters, snapshot=FeedSnapshot(99, 1234, 7, 1_700_000_000_000, b"batches"))
    refused = FeedResponse(-1, -1, refused="this controller belongs to cluster X, not Y")
    for resp in (entries, snapshot, refused, FeedResponse(0, 0)):
        assert decode_response(encode_response(resp)[4:]) == resp


def test_malformed_observer_frames_are_errors_naming_the_field() -> None:
    with pytest.raises(FeedProtocolError, match="expected 16"):
        decode_request(b"\x00" * 3)
    with pytest.raises(FeedProtocolError, match="max_bytes 0"):
        decode_request(encode_request(FeedRequest(1, 1, 1))[4:-4] + b"\x00\x00\x00\x00")
    whole = encode_response(FeedResponse(3, 7, entries=(_entry(1, size=100),)))[4:]
    with pytest.raises(FeedProtocolError):
        decode_response(whole[:-50])
    with pytest.raises(FeedProtocolError, match="unknown kind"):
        decode_response(b"\x09" + whole[1:])


def _broker(**props: str) -> BrokerConfig:
    return BrokerConfig({"process.roles": "broker", "node.id": "4", "controller.listener.names": "CONTROLLER",
                         "listeners": "PLAINTEXT://127.0.0.1:9092", **{k.replace("_", "."): v for k, v in props.items()}})


def test_a_broker_only_node_finds_the_quorum_through_its_voters_or_bootstrap_servers() -> None:
    cfg = ObserverConfig.from_broker_config(_broker(controller_quorum_voters="1@h:1,2@h:2,3@h:3"))
    assert sorted(cfg.voters) == [1, 2, 3] and cfg.node_id == 4 and cfg.bootstrap == ()
    cfg = ObserverConfig.from_broker_config(_broker(controller_quorum_bootstrap_servers="h:1,[::1]:2"))
    assert cfg.voters == {} and cfg.bootstrap == (("h", 1), ("::1", 2))


@pytest.mark.parametrize(("props", "message"), [
    ({"node_id": "2", "controller_quorum_voters": "1@h:1,2@h:2,3@h:3"}, "process.roles: node.id 2 is a voter"),
    ({"controller_quorum_voters": "1@h:1", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
     "listeners: a broker-only node has no controller listener"),
    ({"controller_quorum_voters": "1@h:1", "controller_quorum_bootstrap_servers": "h:1"},
     "controller.quorum.bootstrap.servers: set either controller.quorum.voters"),
    ({"controller_quorum_bootstrap_servers": "h"}, "controller.quorum.bootstrap.servers: 'h' is not <host>:<port>"),
])
def test_a_misconfigured_broker_only_node_is_refused_naming_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(QuorumConfigError, match=re.escape(message)):
        ObserverConfig.from_broker_config(_broker(**props))


def test_a_broker_only_node_without_a_quorum_stops_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="controller.quorum.voters"):
        _broker()
