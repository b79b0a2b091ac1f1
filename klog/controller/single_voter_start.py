"""What a single voter writes for itself at start, decided here, committed by the broker's ClusterMetadata.

A single voter (``klog-broker`` without a quorum) is its own controller and sends itself no BrokerRegistration or
heartbeat: at each start it registers itself unfenced (:func:`own_registration`, broker epoch
:func:`registration_epoch`) and then makes the elections Kafka's controller makes when a broker is unfenced
(:func:`start_elections`, Kafka's ``handleBrokerUnfenced`` through
:func:`klog.controller.brokers.unfenced_broker_elections`). Pure functions of the image and the node's config:
``klog/broker/cluster_metadata.py``'s ``ClusterMetadata._bootstrap`` only commits what they return.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from klog.metadata.config import BrokerConfig
from klog.metadata.features import supported_features
from klog.metadata.image import MetadataImage
from klog.metadata.records import MetadataRecord, record

from .brokers import unfenced_broker_elections
from .partition_change import unclean_election_allowed

__all__ = ["SECURITY_PROTOCOL_IDS", "SUPPORTED_FEATURES", "own_registration", "registration_epoch",
           "start_elections"]

#: Kafka's SecurityProtocol ids, as registrations carry a listener's protocol
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
#: (name, min, max) of every feature this node supports, as its registration states them
SUPPORTED_FEATURES = tuple(supported_features())


def registration_epoch(committed_end: int, records_before: int, max_records_per_batch: int) -> int:
    """The broker epoch of a registration committed after ``records_before`` other records of the same commit at
    ``committed_end``: its offset (one more when the commit is wrapped in a metadata transaction, whose
    BeginTransactionRecord comes first), as Kafka's controller takes a registration's offset as the epoch."""
    transaction = 1 if records_before + 1 > max_records_per_batch else 0
    return committed_end + records_before + transaction


def own_registration(config: BrokerConfig, endpoints: Mapping[str, tuple[str, int]], broker_epoch: int,
                     incarnation_id: uuid.UUID | None = None) -> MetadataRecord:
    """This node's RegisterBrokerRecord: its bound ``endpoints`` (listener name -> host, port) with their
    listeners' security protocols, its supported features and rack, unfenced, no log dirs (its partition records
    name none)."""
    protocols = {lst.name: lst.security_protocol for lst in config.listeners}
    return record(
        "RegisterBrokerRecord", broker_id=config.node_id, incarnation_id=incarnation_id or uuid.uuid4(),
        broker_epoch=broker_epoch,
        end_points=[{"name": name, "host": host, "port": port,
                     "security_protocol": SECURITY_PROTOCOL_IDS.get(protocols.get(name, "PLAINTEXT"), 0)}
                    for name, (host, port) in endpoints.items()],
        features=[{"name": name, "min_supported_version": lo, "max_supported_version": hi}
                  for name, lo, hi in SUPPORTED_FEATURES],
        rack=config["broker.rack"], fenced=False, in_controlled_shutdown=False, log_dirs=[])


def start_elections(image: MetadataImage, config: BrokerConfig) -> list[MetadataRecord]:
    """The elections of this node's unfencing (the only live broker: itself): it leads the partitions without a
    leader it may lead. A node that only ever ran as klog's single node leads every partition already; a data
    dir Kafka's own combined node left (its controlled shutdown leaves its partitions without a leader, this node
    in their ELR) is led again."""
    node_id = config.node_id
    unclean_default = config["unclean.leader.election.enable"]
    return unfenced_broker_elections(
        image, node_id, lambda broker: broker == node_id,
        lambda topic: unclean_election_allowed(image, topic, unclean_default), config["min.insync.replicas"])
