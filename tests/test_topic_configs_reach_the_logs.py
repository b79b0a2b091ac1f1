"""A topic config value the controller commits must be one every broker's logs can take: the broker applies it after
the commit, where refusing it cannot be answered to the client any more. Checked value by value against the native
log config (no broker needed), and, for a value klog's logs could not take, that the broker keeps serving and
applying the metadata changes after it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.broker.partitions import native_log_config
from klog.metadata.config import TOPIC_KEYS, TopicConfigError, check_topic_configs

#: the topic configs the native log config is made of
LOG_KEYS = ("segment.bytes", "segment.ms", "segment.index.bytes", "index.interval.bytes", "retention.ms",
            "retention.bytes", "flush.messages", "flush.ms", "message.timestamp.type", "file.delete.delay.ms",
            "preallocate", "max.message.bytes", "cleanup.policy", "delete.retention.ms", "min.cleanable.dirty.ratio",
            "min.compaction.lag.ms", "max.compaction.lag.ms")
INT_EDGES = [-2**31, -3, -2, -1, 0, 1, 3, 4, 11, 12, 13, 14, 15, 1023, 1024, 1 << 20, 2**31 - 1]
LONG_EDGES = [-2**63, *INT_EDGES, 2**31, 2**63 - 1]
CANDIDATES: dict[str, list[Any]] = {
    "int": INT_EDGES, "long": LONG_EDGES, "double": [-0.1, 0.0, 1e-9, 0.5, 1.0, 1.1],
    "boolean": ["true", "false"], "string": ["CreateTime", "LogAppendTime"],
    "list": ["delete", "compact", "compact,delete", "delete,compact", ""],
}


def _defaults(config: BrokerConfig) -> dict[str, Any]:
    return {key: config.topic_default(key) for key in TOPIC_KEYS}


@pytest.mark.parametrize("key", LOG_KEYS)
def test_every_value_the_controller_accepts_is_taken_by_the_native_log(key: str) -> None:
    config = BrokerConfig({})
    defaults = _defaults(config)
    accepted = 0
    for value in CANDIDATES[TOPIC_KEYS[key].type]:
        try:
            parsed = check_topic_configs({key: str(value)}, config.topic_default)
        except TopicConfigError:
            continue   # refused before the commit: answered to the client as Kafka's controller answers it
        accepted += 1
        native_log_config({**defaults, **parsed})   # raises ValueError for a value the logs cannot take
    assert accepted, f"no candidate value of {key} was accepted: the candidates do not reach its range"


def test_a_committed_config_the_logs_cannot_take_is_logged_and_later_changes_still_apply(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        state = BrokerState(BrokerConfig({"log.dirs": str(tmp_path)}), asyncio.get_running_loop())
        partitions = state.partitions
        try:
            partitions.apply_topic("t", uuid.uuid4(), {0: 0}, {"retention.ms": "1000"})
            before = partitions.topic_config("t")
            # as if a controller had committed a value this broker cannot take (another version's checks; none of
            # this version's is known, as the test above shows): the broker must not be wedged by it
            with caplog.at_level(logging.ERROR, logger="klog.broker.partitions"):
                partitions.set_topic_configs("t", {"max.compaction.lag.ms": "0"})
            assert partitions.topic_config("t") is before
            assert any("cannot be applied to its logs" in r.getMessage() for r in caplog.records)
            partitions.set_topic_configs("t", {"retention.ms": "2000"})   # the next change applies
            assert partitions.topic_config("t")["retention.ms"] == 2000
        finally:
            state.close()

    asyncio.run(scenario())
