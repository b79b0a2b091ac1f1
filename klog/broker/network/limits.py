"""Every bound of the broker's network front, named after its config key and read once at start."""

from __future__ import annotations

from klog.broker.config import BrokerConfig


class Limits:
    """Every network limit, named after its config key."""

    def __init__(self, config: BrokerConfig) -> None:
        self.max_frame_bytes: int = config["socket.request.max.bytes"]
        self.max_connections: int = config["max.connections"]
        self.max_connections_per_ip: int = config["max.connections.per.ip"]
        self.max_inflight: int = config["klog.connection.max.inflight.requests"]
        self.max_buffered_bytes: int = config["klog.connection.max.buffered.bytes"]
        self.produce_pipeline_depth: int = config["klog.produce.pipeline.depth"]
        queued = config["queued.max.request.bytes"]
        #: queued.max.request.bytes (None: unbounded, Kafka's -1)
        self.max_queued_request_bytes: int | None = None if queued < 0 else queued
        #: the native front's large frames: the largest read whole, and the bytes held in their buffers at once
        self.front_max_frame_bytes: int = min(config["klog.network.native.front.frame.max.bytes"],
                                              self.max_frame_bytes)
        front_held = config["klog.network.native.front.buffer.max.bytes"]
        self.front_max_held_bytes: int = front_held if self.max_queued_request_bytes is None \
            else min(front_held, self.max_queued_request_bytes)
        self.write_timeout_s: float = config["klog.connection.write.timeout.ms"] / 1000
        idle = config["connections.max.idle.ms"]
        self.idle_timeout_s: float | None = None if idle < 0 else idle / 1000
