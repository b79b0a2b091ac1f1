"""Broker-wide state shared by the handlers and handed to the group coordinator (see groups/api.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Any

from klog.broker.config import BrokerConfig
from klog.broker.partitions import PartitionManager, TopicError
from klog.broker.producer_state import ProducerStateManager

log = logging.getLogger("klog.broker")

META_PROPERTIES = "meta.properties"


def _load_or_create_cluster_id(config: BrokerConfig) -> str:
    """Kafka keeps ``meta.properties`` (version, node.id, cluster.id, directory.id) in every log dir; klog
    does the same so a data dir cannot silently be reused by another node id."""
    import javaproperties

    found: dict[str, str] | None = None
    for directory in config.log_dirs:
        path = os.path.join(directory, META_PROPERTIES)
        try:
            with open(path, encoding="utf-8") as handle:
                props = dict(javaproperties.load(handle))
        except FileNotFoundError:
            continue
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != config.node_id:
            raise RuntimeError(f"{path}: this log dir belongs to node.id {stored_node}, but the config says "
                               f"node.id {config.node_id}")
        found = props
        break
    cluster_id = config["cluster.id"] or (found or {}).get("cluster.id")
    if found is not None and config["cluster.id"] and found.get("cluster.id") not in (None, config["cluster.id"]):
        raise RuntimeError(f"log dirs belong to cluster {found.get('cluster.id')}, config says "
                           f"cluster.id {config['cluster.id']}")
    if not cluster_id:
        # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
        import base64

        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    for directory in config.log_dirs:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, META_PROPERTIES)
        if os.path.exists(path):
            continue
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\nnode.id={config.node_id}\n"
                         f"directory.id={uuid.uuid4()}\nversion=1\ncluster.id={cluster_id}\n")
    return cluster_id


class BrokerState:
    """Everything a handler can reach. Implements ``klog.broker.groups.api.BrokerContext``."""

    def __init__(self, config: BrokerConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.node_id = config.node_id
        self.cluster_id = _load_or_create_cluster_id(config)
        listener = config.listeners[0]
        self.listener_name = listener.name
        advertised = config.advertised[listener.name]
        # Filled in once the listener is bound (port 0 means "pick a free port").
        self.host = advertised.host or listener.host or "127.0.0.1"
        self.port = advertised.port
        self.rack: str | None = config["broker.rack"]
        self.partitions = PartitionManager(config, loop)
        self.producers = ProducerStateManager(config.log_dirs[0], config["producer.id.expiration.ms"])
        for topic, partition in list(self.partitions._logs):
            log_ = self.partitions.get(topic, partition)
            self.producers.truncate_check(topic, partition, log_.log_end_offset)
        self.coordinator: Any = None
        #: api key -> (min, max) advertised in ApiVersions; set by the server at startup
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.started_at = time.time()

    # ---- groups.api.BrokerContext -------------------------------------------------------------------

    @property
    def log_manager(self) -> Any:
        return self.partitions.log_manager

    def ensure_internal_topic(self, topic: str, num_partitions: int, configs: dict[str, str]) -> None:
        if self.partitions.partition_count(topic) is not None:
            return
        self.partitions.create_topic(topic, num_partitions, dict(configs), internal=True)

    def partition_count(self, topic: str) -> int | None:
        return self.partitions.partition_count(topic)

    def partition_log(self, topic: str, partition: int) -> Any:
        return self.partitions.get(topic, partition)

    def append(self, topic: str, partition: int, records: bytes) -> Any:
        return self.partitions.append(topic, partition, records)

    # ---- helpers for handlers -----------------------------------------------------------------------

    def auto_create_topic(self, name: str) -> int:
        """Create ``name`` with the broker defaults; returns a Kafka error code (0 on success)."""
        try:
            self.partitions.create_topic(name, self.config["num.partitions"], {},
                                         replication_factor=self.config["default.replication.factor"])
            return 0
        except TopicError as exc:
            if exc.code == 36:   # created meanwhile
                return 0
            return exc.code

    def close(self) -> None:
        try:
            self.producers.save()
        except OSError as exc:
            log.warning("could not save producer state: %s", exc)
        self.partitions.close()
