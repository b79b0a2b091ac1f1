"""Kafka's KRaft record definitions, transcribed from Apache Kafka 4.3.1.

Source of truth: ``metadata/src/main/resources/common/metadata/*.json`` (the records of the
``__cluster_metadata`` log, ``"type": "metadata"``, each with an ``apiKey``) and, for the Raft layer's control
records, ``clients/src/main/resources/common/message/{LeaderChangeMessage,SnapshotHeaderRecord,
SnapshotFooterRecord,KRaftVersionRecord,VotersRecord}.json`` keyed by their ``ControlRecordType``
(``clients/.../record/ControlRecordType.java``). Same tuple format as :mod:`klog.protocol.schemas`; field names
are Kafka's in snake_case (``KRaft`` -> ``kraft``). Record keys that Kafka retired (6 IsrChange, 13
RemoveFeatureLevel, 16 ProducerId) are absent, as in Kafka 4.x.
"""

from __future__ import annotations

METADATA_RECORD_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = []
CONTROL_RECORD_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = []


def RECORD(api_key: int, name: str, versions: str, *, flexible: str, fields: tuple) -> None:
    METADATA_RECORD_DEFINITIONS.append((api_key, name, versions, flexible, fields))


def CONTROL(control_type: int, name: str, versions: str, *, flexible: str, fields: tuple) -> None:
    CONTROL_RECORD_DEFINITIONS.append((control_type, name, versions, flexible, fields))


RECORD(0, 'RegisterBrokerRecord', '0-4', flexible='0+', fields=(
    ('broker_id', 'int32', '0+'),
    ('is_migrating_zk_broker', 'bool', '2+', {'default': False}),
    ('incarnation_id', 'uuid', '0+'),
    ('broker_epoch', 'int64', '0+'),
    ('end_points', '[]BrokerEndpoint', '0+', (
        ('name', 'string', '0+'),
        ('host', 'string', '0+'),
        ('port', 'uint16', '0+'),
        ('security_protocol', 'int16', '0+'),
    )),
    ('features', '[]BrokerFeature', '0+', (
        ('name', 'string', '0+'),
        ('min_supported_version', 'int16', '0+'),
        ('max_supported_version', 'int16', '0+'),
    )),
    ('rack', 'string', '0+', {'nullable': '0+'}),
    ('fenced', 'bool', '0+', {'default': True}),
    ('in_controlled_shutdown', 'bool', '1+', {'default': False}),
    ('log_dirs', '[]uuid', '3+', {'tag': 0}),
    ('cordoned_log_dirs', '[]uuid', '4+', {'nullable': '4+', 'default': None, 'tag': 1}),
))
RECORD(1, 'UnregisterBrokerRecord', '0', flexible='0+', fields=(
    ('broker_id', 'int32', '0+'),
    ('broker_epoch', 'int64', '0+'),
))
RECORD(2, 'TopicRecord', '0', flexible='0+', fields=(
    ('name', 'string', '0+'),
    ('topic_id', 'uuid', '0+'),
))
RECORD(3, 'PartitionRecord', '0-2', flexible='0+', fields=(
    ('partition_id', 'int32', '0+', {'default': -1}),
    ('topic_id', 'uuid', '0+'),
    ('replicas', '[]int32', '0+'),
    ('isr', '[]int32', '0+'),
    ('removing_replicas', '[]int32', '0+'),
    ('adding_replicas', '[]int32', '0+'),
    ('leader', 'int32', '0+', {'default': -1}),
    ('leader_recovery_state', 'int8', '0+', {'default': 0, 'tag': 0}),
    ('leader_epoch', 'int32', '0+', {'default': -1}),
    ('partition_epoch', 'int32', '0+', {'default': -1}),
    ('directories', '[]uuid', '1+'),
    ('eligible_leader_replicas', '[]int32', '2+', {'nullable': '2+', 'default': None, 'tag': 1}),
    ('last_known_elr', '[]int32', '2+', {'nullable': '2+', 'default': None, 'tag': 2}),
))
RECORD(4, 'ConfigRecord', '0', flexible='0+', fields=(
    ('resource_type', 'int8', '0+'),
    ('resource_name', 'string', '0+'),
    ('name', 'string', '0+'),
    ('value', 'string', '0+', {'nullable': '0+'}),
))
RECORD(5, 'PartitionChangeRecord', '0-2', flexible='0+', fields=(
    ('partition_id', 'int32', '0+', {'default': -1}),
    ('topic_id', 'uuid', '0+'),
    ('isr', '[]int32', '0+', {'nullable': '0+', 'default': None, 'tag': 0}),
    ('leader', 'int32', '0+', {'default': -2, 'tag': 1}),
    ('replicas', '[]int32', '0+', {'nullable': '0+', 'default': None, 'tag': 2}),
    ('removing_replicas', '[]int32', '0+', {'nullable': '0+', 'default': None, 'tag': 3}),
    ('adding_replicas', '[]int32', '0+', {'nullable': '0+', 'default': None, 'tag': 4}),
    ('leader_recovery_state', 'int8', '0+', {'default': -1, 'tag': 5}),
    ('directories', '[]uuid', '1+', {'nullable': '1+', 'default': None, 'tag': 8}),
    ('eligible_leader_replicas', '[]int32', '2+', {'nullable': '2+', 'default': None, 'tag': 6}),
    ('last_known_elr', '[]int32', '2+', {'nullable': '2+', 'default': None, 'tag': 7}),
))
RECORD(7, 'FenceBrokerRecord', '0', flexible='0+', fields=(
    ('id', 'int32', '0+'),
    ('epoch', 'int64', '0+'),
))
RECORD(8, 'UnfenceBrokerRecord', '0', flexible='0+', fields=(
    ('id', 'int32', '0+'),
    ('epoch', 'int64', '0+'),
))
RECORD(9, 'RemoveTopicRecord', '0', flexible='0+', fields=(
    ('topic_id', 'uuid', '0+'),
))
RECORD(10, 'DelegationTokenRecord', '0', flexible='0+', fields=(
    ('owner', 'string', '0+'),
    ('requester', 'string', '0+'),
    ('renewers', '[]string', '0+'),
    ('issue_timestamp', 'int64', '0+'),
    ('max_timestamp', 'int64', '0+'),
    ('expiration_timestamp', 'int64', '0+'),
    ('token_id', 'string', '0+'),
))
RECORD(11, 'UserScramCredentialRecord', '0', flexible='0+', fields=(
    ('name', 'string', '0+'),
    ('mechanism', 'int8', '0+'),
    ('salt', 'bytes', '0+'),
    ('stored_key', 'bytes', '0+'),
    ('server_key', 'bytes', '0+'),
    ('iterations', 'int32', '0+'),
))
RECORD(12, 'FeatureLevelRecord', '0', flexible='0+', fields=(
    ('name', 'string', '0+'),
    ('feature_level', 'int16', '0+'),
))
RECORD(14, 'ClientQuotaRecord', '0', flexible='0+', fields=(
    ('entity', '[]EntityData', '0+', (
        ('entity_type', 'string', '0+'),
        ('entity_name', 'string', '0+', {'nullable': '0+'}),
    )),
    ('key', 'string', '0+'),
    ('value', 'float64', '0+'),
    ('remove', 'bool', '0+'),
))
RECORD(15, 'ProducerIdsRecord', '0', flexible='0+', fields=(
    ('broker_id', 'int32', '0+'),
    ('broker_epoch', 'int64', '0+', {'default': -1}),
    ('next_producer_id', 'int64', '0+'),
))
RECORD(17, 'BrokerRegistrationChangeRecord', '0-3', flexible='0+', fields=(
    ('broker_id', 'int32', '0+'),
    ('broker_epoch', 'int64', '0+'),
    ('fenced', 'int8', '0+', {'tag': 0}),
    ('in_controlled_shutdown', 'int8', '1+', {'tag': 1}),
    ('log_dirs', '[]uuid', '2+', {'tag': 2}),
    ('cordoned_log_dirs', '[]uuid', '3+', {'nullable': '3+', 'default': None, 'tag': 3}),
))
RECORD(18, 'AccessControlEntryRecord', '0', flexible='0+', fields=(
    ('id', 'uuid', '0+'),
    ('resource_type', 'int8', '0+'),
    ('resource_name', 'string', '0+'),
    ('pattern_type', 'int8', '0+'),
    ('principal', 'string', '0+'),
    ('host', 'string', '0+'),
    ('operation', 'int8', '0+'),
    ('permission_type', 'int8', '0+'),
))
RECORD(19, 'RemoveAccessControlEntryRecord', '0', flexible='0+', fields=(
    ('id', 'uuid', '0+'),
))
RECORD(20, 'NoOpRecord', '0', flexible='0+', fields=())
RECORD(21, 'ZkMigrationStateRecord', '0', flexible='0+', fields=(
    ('zk_migration_state', 'int8', '0+'),
))
RECORD(22, 'RemoveUserScramCredentialRecord', '0', flexible='0+', fields=(
    ('name', 'string', '0+'),
    ('mechanism', 'int8', '0+'),
))
RECORD(23, 'BeginTransactionRecord', '0', flexible='0+', fields=(
    ('name', 'string', '0+', {'nullable': '0+', 'default': None, 'tag': 0}),
))
RECORD(24, 'EndTransactionRecord', '0', flexible='0+', fields=())
RECORD(25, 'AbortTransactionRecord', '0', flexible='0+', fields=(
    ('reason', 'string', '0+', {'nullable': '0+', 'default': None, 'tag': 0}),
))
RECORD(26, 'RemoveDelegationTokenRecord', '0', flexible='0+', fields=(
    ('token_id', 'string', '0+'),
))
RECORD(27, 'RegisterControllerRecord', '0', flexible='0+', fields=(
    ('controller_id', 'int32', '0+'),
    ('incarnation_id', 'uuid', '0+'),
    ('zk_migration_ready', 'bool', '0+'),
    ('end_points', '[]ControllerEndpoint', '0+', (
        ('name', 'string', '0+'),
        ('host', 'string', '0+'),
        ('port', 'uint16', '0+'),
        ('security_protocol', 'int16', '0+'),
    )),
    ('features', '[]ControllerFeature', '0+', (
        ('name', 'string', '0+'),
        ('min_supported_version', 'int16', '0+'),
        ('max_supported_version', 'int16', '0+'),
    )),
))
RECORD(28, 'ClearElrRecord', '0', flexible='0+', fields=(
    ('topic_name', 'string', '0+'),
))

# Control records of the Raft log (values of control batches; the key is int16 version 0 + int16 type).
CONTROL(2, 'LeaderChangeMessage', '0-1', flexible='0+', fields=(
    ('version', 'int16', '0+'),
    ('leader_id', 'int32', '0+'),
    ('voters', '[]Voter', '0+', (
        ('voter_id', 'int32', '0+'),
        ('voter_directory_id', 'uuid', '1+'),
    )),
    ('granting_voters', '[]Voter', '0+', (
        ('voter_id', 'int32', '0+'),
        ('voter_directory_id', 'uuid', '1+'),
    )),
))
CONTROL(3, 'SnapshotHeaderRecord', '0', flexible='0+', fields=(
    ('version', 'int16', '0+'),
    ('last_contained_log_timestamp', 'int64', '0+'),
))
CONTROL(4, 'SnapshotFooterRecord', '0', flexible='0+', fields=(
    ('version', 'int16', '0+'),
))
CONTROL(5, 'KRaftVersionRecord', '0', flexible='0+', fields=(
    ('version', 'int16', '0+'),
    ('kraft_version', 'int16', '0+'),
))
CONTROL(6, 'VotersRecord', '0', flexible='0+', fields=(
    ('version', 'int16', '0+'),
    ('voters', '[]Voter', '0+', (
        ('voter_id', 'int32', '0+'),
        ('voter_directory_id', 'uuid', '0+'),
        ('endpoints', '[]Endpoint', '0+', (
            ('name', 'string', '0+'),
            ('host', 'string', '0+'),
            ('port', 'uint16', '0+'),
        )),
        ('kraft_version_feature', 'KRaftVersionFeature', '0+', (
            ('min_supported_version', 'int16', '0+'),
            ('max_supported_version', 'int16', '0+'),
        )),
    )),
))
