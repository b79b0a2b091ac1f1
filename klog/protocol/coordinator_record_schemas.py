"""The group coordinator's records (the ``__consumer_offsets`` topic), transcribed from Apache Kafka 4.3.1.

Source of truth: ``group-coordinator/src/main/resources/common/message/*.json`` (``"type": "coordinator-key"`` /
``"coordinator-value"``, each with an ``apiKey``: the record type, ``CoordinatorRecordType`` in Kafka). A record's
key is an int16 record type followed by the key struct, its value an int16 version followed by the value struct;
a null value is a tombstone. Same tuple format as :mod:`klog.protocol.schemas`; field names are Kafka's in
snake_case. Only the records klog writes and reads are here: offset commits, classic group metadata, the
KIP-848 consumer group records, the KIP-932 share group records (10-15) and the KIP-1071 streams group records
(17, 19-23).

Kafka reads a legacy offset commit (type 0) with ``LegacyOffsetCommitValue``, which is ``OffsetCommitValue`` v0;
klog reads it with ``OffsetCommitValue`` (see :mod:`klog.broker.groups.records`), so it has no value here.
"""

from __future__ import annotations

COORDINATOR_KEY_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = []
COORDINATOR_VALUE_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = []


def KEY(record_type: int, name: str, versions: str, *, flexible: str, fields: tuple) -> None:
    COORDINATOR_KEY_DEFINITIONS.append((record_type, name, versions, flexible, fields))


def VALUE(record_type: int, name: str, versions: str, *, flexible: str, fields: tuple) -> None:
    COORDINATOR_VALUE_DEFINITIONS.append((record_type, name, versions, flexible, fields))


_OFFSET_COMMIT_KEY_FIELDS = (
    ('group', 'string', '0'),
    ('topic', 'string', '0'),
    ('partition', 'int32', '0'),
)
_GROUP_ID = ('group_id', 'string', '0')
_MEMBER_ID = ('member_id', 'string', '0')

KEY(0, 'LegacyOffsetCommitKey', '0', flexible='none', fields=_OFFSET_COMMIT_KEY_FIELDS)
KEY(1, 'OffsetCommitKey', '0', flexible='none', fields=_OFFSET_COMMIT_KEY_FIELDS)
VALUE(1, 'OffsetCommitValue', '0-4', flexible='4+', fields=(
    ('offset', 'int64', '0+'),
    ('leader_epoch', 'int32', '3+', {'default': -1}),
    ('metadata', 'string', '0+'),
    ('commit_timestamp', 'int64', '0+'),
    ('expire_timestamp', 'int64', '1', {'default': -1}),
    ('topic_id', 'uuid', '4+', {'tag': 0}),
))

KEY(2, 'GroupMetadataKey', '0', flexible='none', fields=(
    ('group', 'string', '0'),
))
VALUE(2, 'GroupMetadataValue', '0-4', flexible='4+', fields=(
    ('protocol_type', 'string', '0+'),
    ('generation', 'int32', '0+'),
    ('protocol', 'string', '0+', {'nullable': '0+'}),
    ('leader', 'string', '0+', {'nullable': '0+'}),
    ('current_state_timestamp', 'int64', '2+', {'default': -1}),
    ('members', '[]MemberMetadata', '0+', (
        ('member_id', 'string', '0+'),
        ('group_instance_id', 'string', '3+', {'nullable': '3+', 'default': None}),
        ('client_id', 'string', '0+'),
        ('client_host', 'string', '0+'),
        ('rebalance_timeout', 'int32', '1+', {'default': -1}),
        ('session_timeout', 'int32', '0+'),
        ('subscription', 'bytes', '0+'),
        ('assignment', 'bytes', '0+'),
    )),
))

KEY(3, 'ConsumerGroupMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(3, 'ConsumerGroupMetadataValue', '0', flexible='0+', fields=(
    ('epoch', 'int32', '0+'),
    ('metadata_hash', 'int64', '0+', {'default': 0, 'tag': 0}),
))

KEY(4, 'ConsumerGroupPartitionMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(4, 'ConsumerGroupPartitionMetadataValue', '0', flexible='0+', fields=(
    ('topics', '[]TopicMetadata', '0+', (
        ('topic_id', 'uuid', '0+'),
        ('topic_name', 'string', '0+'),
        ('num_partitions', 'int32', '0+'),
        ('partition_metadata', '[]PartitionMetadata', '0+', (
            ('partition', 'int32', '0+'),
            ('racks', '[]string', '0+'),
        )),
    )),
))

KEY(5, 'ConsumerGroupMemberMetadataKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(5, 'ConsumerGroupMemberMetadataValue', '0', flexible='0+', fields=(
    ('instance_id', 'string', '0+', {'nullable': '0+'}),
    ('rack_id', 'string', '0+', {'nullable': '0+'}),
    ('client_id', 'string', '0+'),
    ('client_host', 'string', '0+'),
    ('subscribed_topic_names', '[]string', '0+'),
    ('subscribed_topic_regex', 'string', '0+', {'nullable': '0+'}),
    ('rebalance_timeout_ms', 'int32', '0+', {'default': -1}),
    ('server_assignor', 'string', '0+', {'nullable': '0+'}),
    # No "default": null in Kafka 4.3: the default is a struct of defaults, so an explicit null is written.
    ('classic_member_metadata', 'ClassicMemberMetadata', '0+', {'nullable': '0+', 'tag': 0}, (
        ('session_timeout_ms', 'int32', '0+'),
        ('supported_protocols', '[]ClassicProtocol', '0+', (
            ('name', 'string', '0+'),
            ('metadata', 'bytes', '0+'),
        )),
    )),
))

KEY(6, 'ConsumerGroupTargetAssignmentMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(6, 'ConsumerGroupTargetAssignmentMetadataValue', '0', flexible='0+', fields=(
    ('assignment_epoch', 'int32', '0+'),
    ('assignment_timestamp', 'int64', '0+', {'tag': 0}),
))

KEY(7, 'ConsumerGroupTargetAssignmentMemberKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(7, 'ConsumerGroupTargetAssignmentMemberValue', '0', flexible='0+', fields=(
    ('topic_partitions', '[]TopicPartition', '0+', (
        ('topic_id', 'uuid', '0+'),
        ('partitions', '[]int32', '0+'),
    )),
))

# Both lists of ConsumerGroupCurrentMemberAssignmentValue are of Kafka's common struct TopicPartitions.
_TOPIC_PARTITIONS_WITH_EPOCHS = (
    ('topic_id', 'uuid', '0+'),
    ('partitions', '[]int32', '0+'),
    ('assignment_epochs', '[]int32', '0+', {'nullable': '0+', 'tag': 0}),
)
KEY(8, 'ConsumerGroupCurrentMemberAssignmentKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(8, 'ConsumerGroupCurrentMemberAssignmentValue', '0', flexible='0+', fields=(
    ('member_epoch', 'int32', '0+'),
    ('previous_member_epoch', 'int32', '0+'),
    ('state', 'int8', '0+'),
    ('assigned_partitions', '[]TopicPartitions', '0+', _TOPIC_PARTITIONS_WITH_EPOCHS),
    ('partitions_pending_revocation', '[]TopicPartitions', '0+', _TOPIC_PARTITIONS_WITH_EPOCHS),
))


# KIP-932 share groups (Kafka 4.3.1's ShareGroup*.json; type 9, ShareGroupPartitionMetadata, was removed).
_TOPIC_PARTITIONS = (
    ('topic_id', 'uuid', '0+'),
    ('partitions', '[]int32', '0+'),
)
KEY(10, 'ShareGroupMemberMetadataKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(10, 'ShareGroupMemberMetadataValue', '0', flexible='0+', fields=(
    ('rack_id', 'string', '0+', {'nullable': '0+'}),
    ('client_id', 'string', '0+'),
    ('client_host', 'string', '0+'),
    ('subscribed_topic_names', '[]string', '0+'),
))
KEY(11, 'ShareGroupMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(11, 'ShareGroupMetadataValue', '0', flexible='0+', fields=(
    ('epoch', 'int32', '0+'),
    ('metadata_hash', 'int64', '0+'),
))
KEY(12, 'ShareGroupTargetAssignmentMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(12, 'ShareGroupTargetAssignmentMetadataValue', '0', flexible='0+', fields=(
    ('assignment_epoch', 'int32', '0+'),
    ('assignment_timestamp', 'int64', '0+', {'default': 0, 'tag': 0}),
))
KEY(13, 'ShareGroupTargetAssignmentMemberKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(13, 'ShareGroupTargetAssignmentMemberValue', '0', flexible='0+', fields=(
    ('topic_partitions', '[]TopicPartition', '0+', _TOPIC_PARTITIONS),
))
KEY(14, 'ShareGroupCurrentMemberAssignmentKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(14, 'ShareGroupCurrentMemberAssignmentValue', '0', flexible='0+', fields=(
    ('member_epoch', 'int32', '0+'),
    ('previous_member_epoch', 'int32', '0+'),
    ('state', 'int8', '0+'),
    ('assigned_partitions', '[]TopicPartitions', '0+', _TOPIC_PARTITIONS),
))
_SHARE_TOPIC_INFO = (
    ('topic_id', 'uuid', '0+'),
    ('topic_name', 'string', '0+'),
)
KEY(15, 'ShareGroupStatePartitionMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(15, 'ShareGroupStatePartitionMetadataValue', '0', flexible='0+', fields=(
    ('initializing_topics', '[]TopicPartitionsInfo', '0+', (*_SHARE_TOPIC_INFO, ('partitions', '[]int32', '0+'))),
    ('initialized_topics', '[]TopicPartitionsInfo', '0+', (*_SHARE_TOPIC_INFO, ('partitions', '[]int32', '0+'))),
    ('deleting_topics', '[]TopicInfo', '0+', _SHARE_TOPIC_INFO),
))

# KIP-1071 streams groups (Kafka 4.3.1's StreamsGroup*.json; type 18, StreamsGroupPartitionMetadata, was removed).
_TASK_IDS = (
    ('subtopology_id', 'string', '0+'),
    ('partitions', '[]int32', '0+'),
)
_TASK_IDS_WITH_EPOCHS = (
    *_TASK_IDS,
    # Kafka's JSON says "default": null, which its generator reads as no default: an empty list
    ('assignment_epochs', '[]int32', '0+', {'nullable': '0+', 'tag': 0}),
)
_KEY_VALUE = (
    ('key', 'string', '0+'),
    ('value', 'string', '0+'),
)
_STREAMS_TOPIC_INFO = (
    ('name', 'string', '0+'),
    ('partitions', 'int32', '0+'),
    ('replication_factor', 'int16', '0+'),
    ('topic_configs', '[]TopicConfig', '0+', _KEY_VALUE),
)
KEY(17, 'StreamsGroupMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(17, 'StreamsGroupMetadataValue', '0', flexible='0+', fields=(
    ('epoch', 'int32', '0+'),
    ('metadata_hash', 'int64', '0+'),
    ('validated_topology_epoch', 'int32', '0+', {'default': -1, 'tag': 0}),
    ('last_assignment_configs', '[]LastAssignmentConfig', '0+', {'nullable': '0+', 'tag': 1},
     _KEY_VALUE),
))
KEY(19, 'StreamsGroupMemberMetadataKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(19, 'StreamsGroupMemberMetadataValue', '0', flexible='0+', fields=(
    ('instance_id', 'string', '0+', {'nullable': '0+'}),
    ('rack_id', 'string', '0+', {'nullable': '0+'}),
    ('client_id', 'string', '0+'),
    ('client_host', 'string', '0+'),
    ('rebalance_timeout_ms', 'int32', '0+', {'default': -1}),
    ('topology_epoch', 'int32', '0+'),
    ('process_id', 'string', '0+'),
    ('user_endpoint', 'Endpoint', '0+', {'nullable': '0+', 'default': None}, (
        ('host', 'string', '0+'),
        ('port', 'uint16', '0+'),
    )),
    ('client_tags', '[]KeyValue', '0+', _KEY_VALUE),
))
KEY(20, 'StreamsGroupTargetAssignmentMetadataKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(20, 'StreamsGroupTargetAssignmentMetadataValue', '0', flexible='0+', fields=(
    ('assignment_epoch', 'int32', '0+'),
    ('assignment_timestamp', 'int64', '0+', {'default': 0, 'tag': 0}),
))
KEY(21, 'StreamsGroupTargetAssignmentMemberKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(21, 'StreamsGroupTargetAssignmentMemberValue', '0', flexible='0+', fields=(
    ('active_tasks', '[]TaskIds', '0+', _TASK_IDS),
    ('standby_tasks', '[]TaskIds', '0+', _TASK_IDS),
    ('warmup_tasks', '[]TaskIds', '0+', _TASK_IDS),
))
KEY(22, 'StreamsGroupCurrentMemberAssignmentKey', '0', flexible='none', fields=(_GROUP_ID, _MEMBER_ID))
VALUE(22, 'StreamsGroupCurrentMemberAssignmentValue', '0', flexible='0+', fields=(
    ('member_epoch', 'int32', '0+'),
    ('previous_member_epoch', 'int32', '0+'),
    ('state', 'int8', '0+'),
    ('active_tasks', '[]TaskIds', '0+', _TASK_IDS_WITH_EPOCHS),
    ('standby_tasks', '[]TaskIds', '0+', _TASK_IDS_WITH_EPOCHS),
    ('warmup_tasks', '[]TaskIds', '0+', _TASK_IDS_WITH_EPOCHS),
    ('active_tasks_pending_revocation', '[]TaskIds', '0+', _TASK_IDS_WITH_EPOCHS),
    ('standby_tasks_pending_revocation', '[]TaskIds', '0+', _TASK_IDS_WITH_EPOCHS),
    ('warmup_tasks_pending_revocation', '[]TaskIds', '0+', _TASK_IDS_WITH_EPOCHS),
))
KEY(23, 'StreamsGroupTopologyKey', '0', flexible='none', fields=(_GROUP_ID,))
VALUE(23, 'StreamsGroupTopologyValue', '0', flexible='0+', fields=(
    ('epoch', 'int32', '0+'),
    ('subtopologies', '[]Subtopology', '0+', (
        ('subtopology_id', 'string', '0+'),
        ('source_topics', '[]string', '0+'),
        ('source_topic_regex', '[]string', '0+'),
        ('state_changelog_topics', '[]TopicInfo', '0+', _STREAMS_TOPIC_INFO),
        ('repartition_sink_topics', '[]string', '0+'),
        ('repartition_source_topics', '[]TopicInfo', '0+', _STREAMS_TOPIC_INFO),
        ('copartition_groups', '[]CopartitionGroup', '0+', (
            ('source_topics', '[]int16', '0+'),
            ('source_topic_regex', '[]int16', '0+'),
            ('repartition_source_topics', '[]int16', '0+'),
        )),
    )),
))

# --- the transaction coordinator's records (the ``__transaction_state`` topic) -------------------------------
# Source of truth: Kafka 4.3's ``transaction-coordinator/src/main/resources/common/message/TransactionLog*.json``.
# One record type (0): the key is an int16 key version (0) followed by the key struct, the value an int16 version
# followed by the value struct (v1, flexible, is what Kafka writes under transaction.version 2); a null value is
# a tombstone (an expired transactional id).
TRANSACTION_LOG_KEY_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = [
    (0, 'TransactionLogKey', '0', 'none', (
        ('transactional_id', 'string', '0'),
    )),
]
TRANSACTION_LOG_VALUE_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = [
    (0, 'TransactionLogValue', '0-1', '1+', (
        ('producer_id', 'int64', '0+'),
        ('previous_producer_id', 'int64', '1+', {'tag': 0, 'default': -1}),
        ('next_producer_id', 'int64', '1+', {'tag': 1, 'default': -1}),
        ('producer_epoch', 'int16', '0+'),
        ('transaction_timeout_ms', 'int32', '0+'),
        ('transaction_status', 'int8', '0+'),
        ('transaction_partitions', '[]PartitionsSchema', '0+', {'nullable': '0+'}, (
            ('topic', 'string', '0+'),
            ('partition_ids', '[]int32', '0+'),
        )),
        ('transaction_last_update_timestamp_ms', 'int64', '0+'),
        ('transaction_start_timestamp_ms', 'int64', '0+'),
        ('client_transaction_version', 'int16', '1+', {'tag': 2, 'default': 0}),
    )),
]


# --- the share coordinator's records (the ``__share_group_state`` topic) --------------------------------------
# Source of truth: Kafka 4.3's ``share-coordinator/src/main/resources/common/message/ShareSnapshot*.json``. Record
# type 0 is a share-partition's whole state (ShareSnapshot), type 1 (ShareUpdate,
# ``ShareUpdate*.json``) Kafka's delta: the changed state batches and the start offset, applied over the snapshot.
SHARE_STATE_KEY_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = [
    (0, 'ShareSnapshotKey', '0', 'none', (
        ('group_id', 'string', '0'),
        ('topic_id', 'uuid', '0'),
        ('partition', 'int32', '0'),
    )),
    (1, 'ShareUpdateKey', '0', 'none', (
        ('group_id', 'string', '0'),
        ('topic_id', 'uuid', '0'),
        ('partition', 'int32', '0'),
    )),
]
SHARE_STATE_VALUE_DEFINITIONS: list[tuple[int, str, str, str, tuple]] = [
    (0, 'ShareSnapshotValue', '0', '0+', (
        ('snapshot_epoch', 'int32', '0+'),
        ('state_epoch', 'int32', '0+'),
        ('leader_epoch', 'int32', '0+'),
        ('start_offset', 'int64', '0+'),
        ('delivery_complete_count', 'int32', '0+', {'tag': 0, 'default': -1}),
        ('create_timestamp', 'int64', '0+'),
        ('write_timestamp', 'int64', '0+'),
        ('state_batches', '[]StateBatch', '0+', (
            ('first_offset', 'int64', '0+'),
            ('last_offset', 'int64', '0+'),
            ('delivery_state', 'int8', '0+'),
            ('delivery_count', 'int16', '0+'),
        )),
    )),
    (1, 'ShareUpdateValue', '0', '0+', (
        ('snapshot_epoch', 'int32', '0+'),
        ('leader_epoch', 'int32', '0+'),
        ('start_offset', 'int64', '0+'),
        ('delivery_complete_count', 'int32', '0+', {'tag': 0, 'default': -1}),
        ('state_batches', '[]StateBatch', '0+', (
            ('first_offset', 'int64', '0+'),
            ('last_offset', 'int64', '0+'),
            ('delivery_state', 'int8', '0+'),
            ('delivery_count', 'int16', '0+'),
        )),
    )),
]
