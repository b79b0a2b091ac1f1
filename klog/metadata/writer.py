"""Image -> records: the records that recreate an image from nothing (a snapshot's content).

Mirrors Kafka's ``MetadataImage.write``: features (metadata.version first), brokers and controllers, topics with
their partitions, configs, client quotas, the producer id block, ACLs, SCRAM credentials and delegation tokens.
Records are written at the newest version this codec knows. Replaying the list on an empty image gives back an
image with the same content (tests/test_metadata_image.py checks it with random record sequences).
"""

from __future__ import annotations

from .image import METADATA_VERSION_FEATURE, MetadataImage
from .records import MetadataRecord, record

__all__ = ["image_records"]


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    out: list[MetadataRecord] = []
    features = sorted(image.features.items(), key=lambda kv: (kv[0] != METADATA_VERSION_FEATURE, kv[0]))
    for name, level in features:
        out.append(record("FeatureLevelRecord", name=name, feature_level=level))
    for bid, b in sorted(image.brokers.items()):
        out.append(record(
            "RegisterBrokerRecord", broker_id=bid, is_migrating_zk_broker=b.is_migrating_zk_broker,
            incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
            end_points=[{"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
                        for e in b.endpoints],
            features=[{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                      for n, lo, hi in b.supported_features],
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=list(b.directories),
            cordoned_log_dirs=None if b.cordoned_directories is None else list(b.cordoned_directories)))
    for cid, c in sorted(image.controllers.items()):
        out.append(record(
            "RegisterControllerRecord", controller_id=cid, incarnation_id=c.incarnation_id,
            zk_migration_ready=c.zk_migration_ready,
            end_points=[{"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
                        for e in c.endpoints],
            features=[{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                      for n, lo, hi in c.supported_features]))
    for _, t in sorted(image.topics_by_name.items()):
        out.append(record("TopicRecord", name=t.name, topic_id=t.id))
        for pid, p in sorted(t.partitions.items()):
            out.append(record(
                "PartitionRecord", partition_id=pid, topic_id=t.id, replicas=list(p.replicas), isr=list(p.isr),
                removing_replicas=list(p.removing_replicas), adding_replicas=list(p.adding_replicas),
                leader=p.leader, leader_recovery_state=int(p.leader_recovery_state), leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, directories=list(p.directories),
                eligible_leader_replicas=list(p.elr), last_known_elr=list(p.last_known_elr)))
    for (rtype, rname), cfg in sorted(image.configs.items(), key=lambda kv: (int(kv[0][0]), kv[0][1])):
        for k, v in sorted(cfg.items()):
            out.append(record("ConfigRecord", resource_type=int(rtype), resource_name=rname, name=k, value=v))
    for entity, quotas in sorted(image.client_quotas.items(), key=lambda kv: repr(kv[0])):
        for key, rate in sorted(quotas.items()):
            out.append(record("ClientQuotaRecord", entity=[{"entity_type": et, "entity_name": en} for et, en in entity],
                              key=key, value=rate, remove=False))
    if image.next_producer_id != -1:
        out.append(record("ProducerIdsRecord", broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id))
    for aid, a in sorted(image.acls.items()):
        out.append(record("AccessControlEntryRecord", id=aid, resource_type=a.resource_type,
                          resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                          host=a.host, operation=a.operation, permission_type=a.permission_type))
    for (name, mechanism), s in sorted(image.scram_credentials.items()):
        out.append(record("UserScramCredentialRecord", name=name, mechanism=mechanism, salt=s.salt,
                          stored_key=s.stored_key, server_key=s.server_key, iterations=s.iterations))
    for token_id, d in sorted(image.delegation_tokens.items()):
        out.append(record("DelegationTokenRecord", owner=d.owner, requester=d.requester, renewers=list(d.renewers),
                          issue_timestamp=d.issue_timestamp, max_timestamp=d.max_timestamp,
                          expiration_timestamp=d.expiration_timestamp, token_id=token_id))
    return out
