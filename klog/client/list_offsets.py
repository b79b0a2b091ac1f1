"""ListOffsets against partition leaders: the offset lookup behind the consumer's positions and
``offsets_for_times`` and the admin client's ``list_offsets``."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterable, Mapping
from typing import Any

from klog.protocol import ApiKey, Struct

from .cluster import STALE_METADATA_ERRORS, Backoff, ClusterClient
from .errors import KafkaConnectionError, KafkaTimeoutError, for_code
from .types import OffsetAndTimestamp, TopicPartition

__all__ = ["list_offsets", "offsets_for_times_result"]

_monotonic = time.monotonic


async def list_offsets(cluster: ClusterClient, query: Mapping[TopicPartition, int], *, isolation_level: int,
                       retry_backoff: Backoff, timeout: float) -> dict[TopicPartition, tuple[int, int, int]]:
    """ListOffsets per leader: tp -> timestamp (-2 earliest, -1 latest, -3 max timestamp, else ms).

    Returns tp -> (offset, timestamp, leader_epoch); partitions without an answer (offset -1) are omitted.
    Shared by the consumer (positions, offsetsForTimes) and the admin client (lag, offset resets).
    """
    deadline = _monotonic() + timeout
    remaining = dict(query)
    out: dict[TopicPartition, tuple[int, int, int]] = {}
    attempt = 0
    while remaining:
        unknown = {tp.topic for tp in remaining if cluster.metadata.leader_for(tp.topic, tp.partition) is None}
        if unknown:
            # Refreshed before the requests, not after: leaders it finds are asked at once, without a
            # retry back-off (a consumer's first poll would otherwise wait retry.backoff.ms).
            cluster.tracked_topics.update(unknown)
            try:
                await cluster.refresh_metadata(timeout=max(0.0, deadline - _monotonic()))
            except KafkaTimeoutError:
                pass
        by_leader: dict[int, list[TopicPartition]] = collections.defaultdict(list)
        missing = False
        for tp in remaining:
            leader = cluster.metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                missing = True
            else:
                by_leader[leader].append(tp)
        retry = False
        for node, tps in by_leader.items():
            topics: dict[str, list[Any]] = collections.defaultdict(list)
            for tp in tps:
                topics[tp.topic].append(Struct(partition_index=tp.partition, timestamp=remaining[tp],
                                               current_leader_epoch=-1, max_num_offsets=1))
            body = Struct(replica_id=-1, isolation_level=isolation_level, timeout_ms=0,
                          topics=[Struct(name=t, partitions=ps) for t, ps in topics.items()])
            try:
                conn = await cluster.connection(node)
                v = conn.version(ApiKey.LIST_OFFSETS, minimum=1)
                r = await conn.request(ApiKey.LIST_OFFSETS, body, version=v)
            except (KafkaConnectionError, KafkaTimeoutError):
                retry = True
                cluster.request_update()
                continue
            for t in r.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in remaining:
                        continue
                    if p.error_code:
                        if p.error_code in STALE_METADATA_ERRORS or for_code(p.error_code).retriable:
                            retry = True
                            cluster.request_update()
                            continue
                        raise for_code(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
                    del remaining[tp]
                    if p.offset >= 0:
                        out[tp] = (p.offset, p.timestamp, p.leader_epoch)
        if remaining and (retry or missing):
            if _monotonic() >= deadline:
                raise KafkaTimeoutError(f"ListOffsets did not complete for {sorted(remaining)}")
            await asyncio.sleep(retry_backoff.delay(attempt))
            attempt += 1
    return out


def offsets_for_times_result(found: dict[TopicPartition, tuple[int, int, int]], query: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    return {tp: (OffsetAndTimestamp(*found[tp]) if tp in found else None) for tp in query}
