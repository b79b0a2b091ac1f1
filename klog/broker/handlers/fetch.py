"""Fetch (1): long poll (max_wait_ms/min_bytes, woken by appends), byte limits, whole batches (KIP-74).

Consumers read only below the high watermark. Before v11 only the leader serves them: a partition this broker
does not lead answers NOT_LEADER_OR_FOLLOWER with the current leader (v12+) and, v16+, the endpoints of the leaders
named (KIP-951). From v11 (KIP-392) a follower serves consumers too, up to the high watermark its leader sent it
(leader-epoch and offset checks as on the leader), and a leader with ``replica.selector.class`` answers a consumer
whose ``rack_id`` holds an in-sync follower with that follower as ``preferred_read_replica`` and no records.
Replicas fetch as Kafka's followers (``ReplicaState`` v15+, the top-level ``replica_id`` before): the
replica manager judges each partition (leader epoch, ``last_fetched_epoch`` against the epoch cache, answering a
``diverging_epoch``) and records the fetch position, which moves the high watermark; replicas read up to the log
end. Topics are named by id from v13 (KIP-516; an id the image lacks answers UNKNOWN_TOPIC_ID).

Records are returned as file regions of the segment files; the server sends them with sendfile on
plaintext connections (zero copy) or copies them otherwise. Fetch sessions (KIP-227) are not kept: every
response carries session id 0, which clients treat as "sessionless, send full fetches".
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from klog._native import CorruptLogError
from klog.broker import errors
from klog.broker.handlers import RequestContext, handler
from klog.broker.handlers.leaders import current_leader, leader_endpoints

from klog.broker.partitions import leader_epoch_error

UNKNOWN_TOPIC_ID = 100
#: Fetch v11 added the consumer's rack_id and preferred_read_replica (KIP-392): from it, followers serve consumers
CLOSEST_REPLICA_VERSION = 11


def _partition_result(index: int, code: int, log_: Any = None) -> dict[str, Any]:
    hw = log_.high_watermark if log_ is not None else -1
    return {"partition_index": index, "error_code": code, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": log_.log_start_offset if log_ is not None else -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}


def _replica(request: Any, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of the fetcher: -1 for a consumer."""
    if version >= 15:
        state = getattr(request, "replica_state", None)
        return (-1, -1) if state is None else (state.replica_id, state.replica_epoch)
    return request.replica_id, -1


def _not_leader(broker: Any, name: str, index: int, leaders: set[int]) -> dict[str, Any]:
    """NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION) with the current leader (KIP-951, a tagged field of
    v12+)."""
    code, leader = current_leader(broker, name, index, leaders)
    answer = _partition_result(index, code)
    if leader is not None:
        answer["current_leader"] = leader
    return answer


def _read_all(broker: Any, request: Any, zero_copy: bool, max_bytes: int, version: int, leaders: set[int],
              judged: dict[tuple[str, int], Any]) -> tuple[list[dict[str, Any]], int, bool, list[tuple[str, int]]]:
    """One pass over the requested partitions: (responses, bytes found, any error, keys to wait on). Topics are
    named by id from v13; ``leaders`` collects the leaders named in NOT_LEADER_OR_FOLLOWER answers. A replica's
    partitions are judged (their fetch position recorded, which moves the high watermark) on the first pass, and
    again only if the leadership changed meanwhile: ``judged`` keeps what each verdict was given under."""
    manager = broker.partitions
    replicas = broker.replicas
    replica_id, broker_epoch = _replica(request, version)
    rack_id = getattr(request, "rack_id", "") if version >= CLOSEST_REPLICA_VERSION else ""
    total = 0
    had_error = False
    keys: list[tuple[str, int]] = []
    responses = []
    for topic_request in request.topics:
        topic_id = getattr(topic_request, "topic_id", errors.ZERO_UUID)
        if version >= 13:
            known = broker.metadata.topic_by_id(topic_id)
            name = known.name if known is not None else None
        else:
            name = topic_request.topic
        topic = manager.topics.get(name) if name is not None else None
        partitions: list[dict[str, Any]] = []
        responses.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
        for preq in topic_request.partitions:
            index = preq.partition
            if name is None:
                partitions.append(_partition_result(index, UNKNOWN_TOPIC_ID))
                had_error = True
                continue
            log_ = manager.get(name, index) if topic is not None else None
            if log_ is None:
                partitions.append(_not_leader(broker, name, index, leaders))
                had_error = True
                continue
            offset = preq.fetch_offset
            throttled = False
            if replica_id >= 0:
                leadership = replicas.leadership(name, index)
                if leadership is None or judged.get((name, index)) != leadership:
                    verdict = replicas.follower_fetch(name, index, replica_id, broker_epoch,
                                                      preq.current_leader_epoch, offset,
                                                      getattr(preq, "last_fetched_epoch", -1), preq.log_start_offset)
                    if verdict.error or not verdict.read:
                        entry = _partition_result(index, verdict.error, log_)
                        if verdict.diverging_epoch is not None:
                            entry["diverging_epoch"] = {"epoch": verdict.diverging_epoch.epoch,
                                                        "end_offset": verdict.diverging_epoch.end_offset}
                        partitions.append(entry)
                        had_error = True
                        continue
                    judged[(name, index)] = leadership
                visible = log_.log_end_offset
                throttle = broker.leader_throttle
                throttled = throttle.is_throttled(name, index)
                if throttled and throttle.holds(name, index):   # leader.replication.throttled.rate used up
                    visible = offset
            else:
                following = bool(replicas.leader_error(name, index))
                if following and version < CLOSEST_REPLICA_VERSION:   # older consumers read from the leader only
                    partitions.append(_not_leader(broker, name, index, leaders))
                    had_error = True
                    continue
                leader_epoch = getattr(preq, "current_leader_epoch", -1)
                code = leader_epoch_error(leader_epoch, manager.leader_epoch(name, index)) if leader_epoch != -1 else 0
                if code:
                    partitions.append(_partition_result(index, code, log_))
                    had_error = True
                    continue
                if offset < log_.log_start_offset or offset > log_.log_end_offset:
                    partitions.append(_partition_result(index, errors.OFFSET_OUT_OF_RANGE, log_))
                    had_error = True
                    continue
                if rack_id and not following:
                    preferred = replicas.preferred_read_replica(name, index, rack_id, offset, broker.rack)
                    if preferred >= 0:   # KIP-392: no records, read them there (answered at once, as Kafka does)
                        entry = _partition_result(index, errors.NONE, log_)
                        entry["preferred_read_replica"] = preferred
                        partitions.append(entry)
                        had_error = True
                        continue
                # a follower serves up to the high watermark its leader sent it
                visible = log_.high_watermark
            keys.append((name, index))
            result_entry = _partition_result(index, errors.NONE, log_)
            partitions.append(result_entry)
            remaining = min(preq.partition_max_bytes, max_bytes - total)
            if offset >= visible or (remaining <= 0 and total > 0):
                continue
            try:
                read = manager.read(log_, offset, max(remaining, 0), min_one_batch=total == 0,
                                    replica=replica_id >= 0)
            except ValueError:  # OffsetOutOfRange: retention moved the start meanwhile
                result_entry["error_code"] = errors.OFFSET_OUT_OF_RANGE
                had_error = True
                continue
            except CorruptLogError:  # damaged segment bytes (logged by the storage engine): never served
                result_entry["error_code"] = errors.CORRUPT_MESSAGE
                had_error = True
                continue
            result_entry["high_watermark"] = read.high_watermark
            result_entry["last_stable_offset"] = read.high_watermark
            result_entry["log_start_offset"] = read.log_start_offset
            if read.length:
                result_entry["records"] = read.slices if zero_copy else read.to_bytes()
                total += read.length
                if throttled:
                    broker.leader_throttle.moved(read.length, broker.leader_throttle.clock())
    return responses, total, had_error, keys


@handler(1, 4, 16)
async def handle_fetch(broker: Any, ctx: RequestContext, request: Any) -> dict[str, Any]:
    session_id = getattr(request, "session_id", 0)
    if session_id != 0:
        return {"throttle_time_ms": 0, "error_code": errors.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                "responses": []}
    version = ctx.api_version
    max_bytes = min(getattr(request, "max_bytes", 2**31 - 1), broker.config["fetch.max.bytes"])
    max_bytes = max(max_bytes, 0)
    min_bytes = request.min_bytes
    max_wait_s = max(request.max_wait_ms, 0) / 1000
    deadline = time.monotonic() + max_wait_s
    leaders: set[int] = set()
    judged: dict[tuple[str, int], Any] = {}
    while True:
        responses, total, had_error, keys = _read_all(broker, request, ctx.zero_copy, max_bytes, version, leaders,
                                                      judged)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or total > 0 and min_bytes <= 0 or had_error or remaining <= 0 or not keys:
            break
        await broker.partitions.wait_for_append(keys, remaining, replica=_replica(request, version)[0] >= 0)
        if time.monotonic() >= deadline:
            # Woken at the deadline: answer with whatever is there now.
            responses, total, had_error, keys = _read_all(broker, request, ctx.zero_copy, max_bytes, version,
                                                          leaders, judged)
            break
        await asyncio.sleep(0)
    if broker.metrics is not None:
        broker.metrics.fetched(responses)
    response = {"throttle_time_ms": 0, "error_code": errors.NONE, "session_id": 0, "responses": responses}
    if leaders and ctx.api_version >= 16:
        response["node_endpoints"] = leader_endpoints(broker, ctx.listener, leaders)
    return response
