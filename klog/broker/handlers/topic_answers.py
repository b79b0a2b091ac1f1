"""The per-topic answers of the offset APIs as Kafka's response builders make them (OffsetCommit, OffsetDelete,
TxnOffsetCommit): the handler's own refusals first, one entry per topic, then the coordinator's answers merged in."""

from __future__ import annotations

import uuid
from typing import Any

from klog.broker import errors
from klog.protocol.struct import field_of

__all__ = ["NO_TOPIC_ID", "TopicAnswers", "known_partitions"]

#: the topic id of a topic named by name (KIP-516's zero id)
NO_TOPIC_ID = uuid.UUID(int=0)


class TopicAnswers:
    """Kafka's OffsetCommitResponse.Builder (OffsetDeleteResponse.Builder likewise): the handler's own refusals, one
    entry per topic (by id from OffsetCommit v10, by name before) in the order first named, then the
    coordinator's answers merged into them (taken as they are when there are none)."""

    def __init__(self, by_id: bool) -> None:
        self.key = "topic_id" if by_id else "name"
        self.topics: list[dict[str, Any]] = []
        self._by_key: dict[Any, dict[str, Any]] = {}

    def add(self, topic: Any, partitions: list[int], code: int) -> None:
        """``topic``: the request's topic entry."""
        key = field_of(topic, self.key)
        entry = self._by_key.get(key)
        if entry is None:
            entry = self._by_key[key] = {"topic_id": field_of(topic, "topic_id", NO_TOPIC_ID),
                                         "name": "" if self.key == "topic_id" else topic.name, "partitions": []}
            self.topics.append(entry)
        entry["partitions"].extend({"partition_index": p, "error_code": code} for p in partitions)

    def merge(self, topics: list[dict[str, Any]]) -> None:
        if not self.topics:
            self.topics = topics
            return
        for topic in topics:
            entry = self._by_key.get(topic[self.key])
            if entry is None:
                self._by_key[topic[self.key]] = topic
                self.topics.append(topic)
            else:
                entry["partitions"].extend(topic["partitions"])


def known_partitions(answers: TopicAnswers, t: Any, topic: Any) -> list[Any]:
    """The partitions of the request's topic ``t`` that ``topic`` (its metadata; None: no such topic) has; the
    others answer UNKNOWN_TOPIC_OR_PARTITION (a topic that does not exist has its entry, even naming no
    partition)."""
    missing = [p.partition_index for p in t.partitions if topic is None or p.partition_index not in topic.partitions]
    if missing or topic is None:
        answers.add(t, missing, errors.UNKNOWN_TOPIC_OR_PARTITION)
    return [p for p in t.partitions if topic is not None and p.partition_index in topic.partitions]
