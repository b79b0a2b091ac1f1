"""Kafka API message definitions, transcribed from Apache Kafka's message JSON files.

Source of truth: ``clients/src/main/resources/common/message/<Name>{Request,Response}.json`` of Apache Kafka
(Kafka 4.3.1 for the newest versions; the 3.9 files for versions Kafka 4.0 dropped, which older clients still
send).
Field names are Kafka's in snake_case.

Each field is ``(name, type, versions[, options][, children])``:

- ``type``: a primitive (``int8 int16 int32 int64 uint16 float64 bool string bytes records uuid``), ``[]<type>``
  for arrays, or a struct name (with children) for a single nested struct.
- ``versions``: ``"3+"``, ``"0-12"`` or ``"5"``.
- ``options``: ``nullable`` (version range), ``default`` (Python value; ``None`` = null), ``tag`` (tagged field
  number) and ``tagged`` (tagged versions, when different from ``versions``).

Absent defaults are the type's zero value: 0, False, "", b"", an empty list, the zero UUID, a struct of
defaults; ``records`` default to null.
"""

from __future__ import annotations

from .schema_tables import API, API_DEFINITIONS, HEADER, HEADER_DEFINITIONS

__all__ = ["API_DEFINITIONS", "HEADER_DEFINITIONS"]


API(0, 'Produce', "0-13", flexible='9+',
    request=(
        ('transactional_id', 'string', '3+', {'nullable': '3+', 'default': None}),
        ('acks', 'int16', '0+'),
        ('timeout_ms', 'int32', '0+'),
        ('topic_data', '[]TopicProduceData', '0+', (
            ('name', 'string', '0-12'),
            ('topic_id', 'uuid', '13+'),
            ('partition_data', '[]PartitionProduceData', '0+', (
                ('index', 'int32', '0+'),
                ('records', 'records', '0+', {'nullable': '0+'}),
            )),
        )),
    ),
    response=(
        ('responses', '[]TopicProduceResponse', '0+', (
            ('name', 'string', '0-12'),
            ('topic_id', 'uuid', '13+'),
            ('partition_responses', '[]PartitionProduceResponse', '0+', (
                ('index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('base_offset', 'int64', '0+'),
                ('log_append_time_ms', 'int64', '2+', {'default': -1}),
                ('log_start_offset', 'int64', '5+', {'default': -1}),
                ('record_errors', '[]BatchIndexAndErrorMessage', '8+', (
                    ('batch_index', 'int32', '8+'),
                    ('batch_index_error_message', 'string', '8+', {'nullable': '8+', 'default': None}),
                )),
                ('error_message', 'string', '8+', {'nullable': '8+', 'default': None}),
                ('current_leader', 'LeaderIdAndEpoch', '10+', {'tag': 0}, (
                    ('leader_id', 'int32', '10+', {'default': -1}),
                    ('leader_epoch', 'int32', '10+', {'default': -1}),
                )),
            )),
        )),
        ('throttle_time_ms', 'int32', '1+', {'default': 0}),
        ('node_endpoints', '[]NodeEndpoint', '10+', {'tag': 0}, (
            ('node_id', 'int32', '10+'),
            ('host', 'string', '10+'),
            ('port', 'int32', '10+'),
            ('rack', 'string', '10+', {'nullable': '10+', 'default': None}),
        )),
    ),
)
API(1, 'Fetch', "0-18", flexible='12+',
    request=(
        ('cluster_id', 'string', '12+', {'nullable': '12+', 'default': None, 'tag': 0}),
        ('replica_id', 'int32', '0-14', {'default': -1}),
        ('replica_state', 'ReplicaState', '15+', {'tag': 1}, (
            ('replica_id', 'int32', '15+', {'default': -1}),
            ('replica_epoch', 'int64', '15+', {'default': -1}),
        )),
        ('max_wait_ms', 'int32', '0+'),
        ('min_bytes', 'int32', '0+'),
        ('max_bytes', 'int32', '3+', {'default': 2147483647}),
        ('isolation_level', 'int8', '4+', {'default': 0}),
        ('session_id', 'int32', '7+', {'default': 0}),
        ('session_epoch', 'int32', '7+', {'default': -1}),
        ('topics', '[]FetchTopic', '0+', (
            ('topic', 'string', '0-12'),
            ('topic_id', 'uuid', '13+'),
            ('partitions', '[]FetchPartition', '0+', (
                ('partition', 'int32', '0+'),
                ('current_leader_epoch', 'int32', '9+', {'default': -1}),
                ('fetch_offset', 'int64', '0+'),
                ('last_fetched_epoch', 'int32', '12+', {'default': -1}),
                ('log_start_offset', 'int64', '5+', {'default': -1}),
                ('partition_max_bytes', 'int32', '0+'),
                ('replica_directory_id', 'uuid', '17+', {'tag': 0}),
                ('high_watermark', 'int64', '18+', {'default': 9223372036854775807, 'tag': 1}),
            )),
        )),
        ('forgotten_topics_data', '[]ForgottenTopic', '7+', (
            ('topic', 'string', '7-12'),
            ('topic_id', 'uuid', '13+'),
            ('partitions', '[]int32', '7+'),
        )),
        ('rack_id', 'string', '11+', {'default': ''}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('error_code', 'int16', '7+'),
        ('session_id', 'int32', '7+', {'default': 0}),
        ('responses', '[]FetchableTopicResponse', '0+', (
            ('topic', 'string', '0-12'),
            ('topic_id', 'uuid', '13+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('high_watermark', 'int64', '0+'),
                ('last_stable_offset', 'int64', '4+', {'default': -1}),
                ('log_start_offset', 'int64', '5+', {'default': -1}),
                ('diverging_epoch', 'EpochEndOffset', '12+', {'tag': 0}, (
                    ('epoch', 'int32', '12+', {'default': -1}),
                    ('end_offset', 'int64', '12+', {'default': -1}),
                )),
                ('current_leader', 'LeaderIdAndEpoch', '12+', {'tag': 1}, (
                    ('leader_id', 'int32', '12+', {'default': -1}),
                    ('leader_epoch', 'int32', '12+', {'default': -1}),
                )),
                ('snapshot_id', 'SnapshotId', '12+', {'tag': 2}, (
                    ('end_offset', 'int64', '0+', {'default': -1}),
                    ('epoch', 'int32', '0+', {'default': -1}),
                )),
                ('aborted_transactions', '[]AbortedTransaction', '4+', {'nullable': '4+'}, (
                    ('producer_id', 'int64', '4+'),
                    ('first_offset', 'int64', '4+'),
                )),
                ('preferred_read_replica', 'int32', '11+', {'default': -1}),
                ('records', 'records', '0+', {'nullable': '0+'}),
            )),
        )),
        ('node_endpoints', '[]NodeEndpoint', '16+', {'tag': 0}, (
            ('node_id', 'int32', '16+'),
            ('host', 'string', '16+'),
            ('port', 'int32', '16+'),
            ('rack', 'string', '16+', {'nullable': '16+', 'default': None}),
        )),
    ),
)
API(2, 'ListOffsets', "0-11", flexible='6+',
    request=(
        ('replica_id', 'int32', '0+'),
        ('isolation_level', 'int8', '2+'),
        ('topics', '[]ListOffsetsTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]ListOffsetsPartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('current_leader_epoch', 'int32', '4+', {'default': -1}),
                ('timestamp', 'int64', '0+'),
                ('max_num_offsets', 'int32', '0', {'default': 1}),
            )),
        )),
        ('timeout_ms', 'int32', '10+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '2+'),
        ('topics', '[]ListOffsetsTopicResponse', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]ListOffsetsPartitionResponse', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('old_style_offsets', '[]int64', '0'),
                ('timestamp', 'int64', '1+', {'default': -1}),
                ('offset', 'int64', '1+', {'default': -1}),
                ('leader_epoch', 'int32', '4+', {'default': -1}),
            )),
        )),
    ),
)
API(3, 'Metadata', "0-13", flexible='9+',
    request=(
        ('topics', '[]MetadataRequestTopic', '0+', {'nullable': '1+'}, (
            ('topic_id', 'uuid', '10+'),
            ('name', 'string', '0+', {'nullable': '10+'}),
        )),
        ('allow_auto_topic_creation', 'bool', '4+', {'default': True}),
        ('include_cluster_authorized_operations', 'bool', '8-10'),
        ('include_topic_authorized_operations', 'bool', '8+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '3+'),
        ('brokers', '[]MetadataResponseBroker', '0+', (
            ('node_id', 'int32', '0+'),
            ('host', 'string', '0+'),
            ('port', 'int32', '0+'),
            ('rack', 'string', '1+', {'nullable': '1+', 'default': None}),
        )),
        ('cluster_id', 'string', '2+', {'nullable': '2+', 'default': None}),
        ('controller_id', 'int32', '1+', {'default': -1}),
        ('topics', '[]MetadataResponseTopic', '0+', (
            ('error_code', 'int16', '0+'),
            ('name', 'string', '0+', {'nullable': '12+'}),
            ('topic_id', 'uuid', '10+'),
            ('is_internal', 'bool', '1+', {'default': False}),
            ('partitions', '[]MetadataResponsePartition', '0+', (
                ('error_code', 'int16', '0+'),
                ('partition_index', 'int32', '0+'),
                ('leader_id', 'int32', '0+'),
                ('leader_epoch', 'int32', '7+', {'default': -1}),
                ('replica_nodes', '[]int32', '0+'),
                ('isr_nodes', '[]int32', '0+'),
                ('offline_replicas', '[]int32', '5+'),
            )),
            ('topic_authorized_operations', 'int32', '8+', {'default': -2147483648}),
        )),
        ('cluster_authorized_operations', 'int32', '8-10', {'default': -2147483648}),
        ('error_code', 'int16', '13+'),
    ),
)
API(8, 'OffsetCommit', "0-10", flexible='8+',
    request=(
        ('group_id', 'string', '0+'),
        ('generation_id_or_member_epoch', 'int32', '1+', {'default': -1}),
        ('member_id', 'string', '1+'),
        ('group_instance_id', 'string', '7+', {'nullable': '7+', 'default': None}),
        ('retention_time_ms', 'int64', '2-4', {'default': -1}),
        ('topics', '[]OffsetCommitRequestTopic', '0+', (
            ('name', 'string', '0-9'),
            ('topic_id', 'uuid', '10+'),
            ('partitions', '[]OffsetCommitRequestPartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('committed_offset', 'int64', '0+'),
                ('committed_leader_epoch', 'int32', '6+', {'default': -1}),
                ('commit_timestamp', 'int64', '1', {'default': -1}),
                ('committed_metadata', 'string', '0+', {'nullable': '0+'}),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '3+'),
        ('topics', '[]OffsetCommitResponseTopic', '0+', (
            ('name', 'string', '0-9'),
            ('topic_id', 'uuid', '10+'),
            ('partitions', '[]OffsetCommitResponsePartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
            )),
        )),
    ),
)
API(9, 'OffsetFetch', "0-10", flexible='6+',
    request=(
        ('group_id', 'string', '0-7'),
        ('topics', '[]OffsetFetchRequestTopic', '0-7', {'nullable': '2-7'}, (
            ('name', 'string', '0-7'),
            ('partition_indexes', '[]int32', '0-7'),
        )),
        ('groups', '[]OffsetFetchRequestGroup', '8+', (
            ('group_id', 'string', '8+'),
            ('member_id', 'string', '9+', {'nullable': '9+', 'default': None}),
            ('member_epoch', 'int32', '9+', {'default': -1}),
            ('topics', '[]OffsetFetchRequestTopics', '8+', {'nullable': '8+'}, (
                ('name', 'string', '8-9'),
                ('topic_id', 'uuid', '10+'),
                ('partition_indexes', '[]int32', '8+'),
            )),
        )),
        ('require_stable', 'bool', '7+', {'default': False}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '3+'),
        ('topics', '[]OffsetFetchResponseTopic', '0-7', (
            ('name', 'string', '0-7'),
            ('partitions', '[]OffsetFetchResponsePartition', '0-7', (
                ('partition_index', 'int32', '0-7'),
                ('committed_offset', 'int64', '0-7'),
                ('committed_leader_epoch', 'int32', '5-7', {'default': -1}),
                ('metadata', 'string', '0-7', {'nullable': '0-7'}),
                ('error_code', 'int16', '0-7'),
            )),
        )),
        ('error_code', 'int16', '2-7', {'default': 0}),
        ('groups', '[]OffsetFetchResponseGroup', '8+', (
            ('group_id', 'string', '8+'),
            ('topics', '[]OffsetFetchResponseTopics', '8+', (
                ('name', 'string', '8-9'),
                ('topic_id', 'uuid', '10+'),
                ('partitions', '[]OffsetFetchResponsePartitions', '8+', (
                    ('partition_index', 'int32', '8+'),
                    ('committed_offset', 'int64', '8+'),
                    ('committed_leader_epoch', 'int32', '8+', {'default': -1}),
                    ('metadata', 'string', '8+', {'nullable': '8+'}),
                    ('error_code', 'int16', '8+'),
                )),
            )),
            ('error_code', 'int16', '8+', {'default': 0}),
        )),
    ),
)
API(10, 'FindCoordinator', "0-6", flexible='3+',
    request=(
        ('key', 'string', '0-3'),
        ('key_type', 'int8', '1+', {'default': 0}),
        ('coordinator_keys', '[]string', '4+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('error_code', 'int16', '0-3'),
        ('error_message', 'string', '1-3', {'nullable': '1-3'}),
        ('node_id', 'int32', '0-3'),
        ('host', 'string', '0-3'),
        ('port', 'int32', '0-3'),
        ('coordinators', '[]Coordinator', '4+', (
            ('key', 'string', '4+'),
            ('node_id', 'int32', '4+'),
            ('host', 'string', '4+'),
            ('port', 'int32', '4+'),
            ('error_code', 'int16', '4+'),
            ('error_message', 'string', '4+', {'nullable': '4+'}),
        )),
    ),
)
API(11, 'JoinGroup', "0-9", flexible='6+',
    request=(
        ('group_id', 'string', '0+'),
        ('session_timeout_ms', 'int32', '0+'),
        ('rebalance_timeout_ms', 'int32', '1+', {'default': -1}),
        ('member_id', 'string', '0+'),
        ('group_instance_id', 'string', '5+', {'nullable': '5+', 'default': None}),
        ('protocol_type', 'string', '0+'),
        ('protocols', '[]JoinGroupRequestProtocol', '0+', (
            ('name', 'string', '0+'),
            ('metadata', 'bytes', '0+'),
        )),
        ('reason', 'string', '8+', {'nullable': '8+', 'default': None}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '2+'),
        ('error_code', 'int16', '0+'),
        ('generation_id', 'int32', '0+', {'default': -1}),
        ('protocol_type', 'string', '7+', {'nullable': '7+', 'default': None}),
        ('protocol_name', 'string', '0+', {'nullable': '7+'}),
        ('leader', 'string', '0+'),
        ('skip_assignment', 'bool', '9+', {'default': False}),
        ('member_id', 'string', '0+'),
        ('members', '[]JoinGroupResponseMember', '0+', (
            ('member_id', 'string', '0+'),
            ('group_instance_id', 'string', '5+', {'nullable': '5+', 'default': None}),
            ('metadata', 'bytes', '0+'),
        )),
    ),
)
API(12, 'Heartbeat', "0-4", flexible='4+',
    request=(
        ('group_id', 'string', '0+'),
        ('generation_id', 'int32', '0+'),
        ('member_id', 'string', '0+'),
        ('group_instance_id', 'string', '3+', {'nullable': '3+', 'default': None}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('error_code', 'int16', '0+'),
    ),
)
API(13, 'LeaveGroup', "0-5", flexible='4+',
    request=(
        ('group_id', 'string', '0+'),
        ('member_id', 'string', '0-2'),
        ('members', '[]MemberIdentity', '3+', (
            ('member_id', 'string', '3+'),
            ('group_instance_id', 'string', '3+', {'nullable': '3+', 'default': None}),
            ('reason', 'string', '5+', {'nullable': '5+', 'default': None}),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('error_code', 'int16', '0+'),
        ('members', '[]MemberResponse', '3+', (
            ('member_id', 'string', '3+'),
            ('group_instance_id', 'string', '3+', {'nullable': '3+'}),
            ('error_code', 'int16', '3+'),
        )),
    ),
)
API(14, 'SyncGroup', "0-5", flexible='4+',
    request=(
        ('group_id', 'string', '0+'),
        ('generation_id', 'int32', '0+'),
        ('member_id', 'string', '0+'),
        ('group_instance_id', 'string', '3+', {'nullable': '3+', 'default': None}),
        ('protocol_type', 'string', '5+', {'nullable': '5+', 'default': None}),
        ('protocol_name', 'string', '5+', {'nullable': '5+', 'default': None}),
        ('assignments', '[]SyncGroupRequestAssignment', '0+', (
            ('member_id', 'string', '0+'),
            ('assignment', 'bytes', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('error_code', 'int16', '0+'),
        ('protocol_type', 'string', '5+', {'nullable': '5+', 'default': None}),
        ('protocol_name', 'string', '5+', {'nullable': '5+', 'default': None}),
        ('assignment', 'bytes', '0+'),
    ),
)
API(15, 'DescribeGroups', "0-6", flexible='5+',
    request=(
        ('groups', '[]string', '0+'),
        ('include_authorized_operations', 'bool', '3+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('groups', '[]DescribedGroup', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '6+', {'nullable': '6+', 'default': None}),
            ('group_id', 'string', '0+'),
            ('group_state', 'string', '0+'),
            ('protocol_type', 'string', '0+'),
            ('protocol_data', 'string', '0+'),
            ('members', '[]DescribedGroupMember', '0+', (
                ('member_id', 'string', '0+'),
                ('group_instance_id', 'string', '4+', {'nullable': '4+', 'default': None}),
                ('client_id', 'string', '0+'),
                ('client_host', 'string', '0+'),
                ('member_metadata', 'bytes', '0+'),
                ('member_assignment', 'bytes', '0+'),
            )),
            ('authorized_operations', 'int32', '3+', {'default': -2147483648}),
        )),
    ),
)
API(16, 'ListGroups', "0-5", flexible='3+',
    request=(
        ('states_filter', '[]string', '4+'),
        ('types_filter', '[]string', '5+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('error_code', 'int16', '0+'),
        ('groups', '[]ListedGroup', '0+', (
            ('group_id', 'string', '0+'),
            ('protocol_type', 'string', '0+'),
            ('group_state', 'string', '4+'),
            ('group_type', 'string', '5+'),
        )),
    ),
)
API(17, 'SaslHandshake', "0-1", flexible='none',
    request=(
        ('mechanism', 'string', '0+'),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('mechanisms', '[]string', '0+'),
    ),
)
API(18, 'ApiVersions', "0-4", flexible='3+',
    request=(
        ('client_software_name', 'string', '3+'),
        ('client_software_version', 'string', '3+'),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('api_keys', '[]ApiVersion', '0+', (
            ('api_key', 'int16', '0+'),
            ('min_version', 'int16', '0+'),
            ('max_version', 'int16', '0+'),
        )),
        ('throttle_time_ms', 'int32', '1+'),
        ('supported_features', '[]SupportedFeatureKey', '3+', {'tag': 0}, (
            ('name', 'string', '3+'),
            ('min_version', 'int16', '3+'),
            ('max_version', 'int16', '3+'),
        )),
        ('finalized_features_epoch', 'int64', '3+', {'default': -1, 'tag': 1}),
        ('finalized_features', '[]FinalizedFeatureKey', '3+', {'tag': 2}, (
            ('name', 'string', '3+'),
            ('max_version_level', 'int16', '3+'),
            ('min_version_level', 'int16', '3+'),
        )),
        ('zk_migration_ready', 'bool', '3+', {'default': False, 'tag': 3}),
    ),
)
API(19, 'CreateTopics', "0-7", flexible='5+',
    request=(
        ('topics', '[]CreatableTopic', '0+', (
            ('name', 'string', '0+'),
            ('num_partitions', 'int32', '0+'),
            ('replication_factor', 'int16', '0+'),
            ('assignments', '[]CreatableReplicaAssignment', '0+', (
                ('partition_index', 'int32', '0+'),
                ('broker_ids', '[]int32', '0+'),
            )),
            ('configs', '[]CreatableTopicConfig', '0+', (
                ('name', 'string', '0+'),
                ('value', 'string', '0+', {'nullable': '0+'}),
            )),
        )),
        ('timeout_ms', 'int32', '0+', {'default': 60000}),
        ('validate_only', 'bool', '1+', {'default': False}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '2+'),
        ('topics', '[]CreatableTopicResult', '0+', (
            ('name', 'string', '0+'),
            ('topic_id', 'uuid', '7+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '1+', {'nullable': '0+'}),
            ('topic_config_error_code', 'int16', '5+', {'tag': 0}),
            ('num_partitions', 'int32', '5+', {'default': -1}),
            ('replication_factor', 'int16', '5+', {'default': -1}),
            ('configs', '[]CreatableTopicConfigs', '5+', {'nullable': '5+'}, (
                ('name', 'string', '5+'),
                ('value', 'string', '5+', {'nullable': '5+'}),
                ('read_only', 'bool', '5+'),
                ('config_source', 'int8', '5+', {'default': -1}),
                ('is_sensitive', 'bool', '5+'),
            )),
        )),
    ),
)
API(20, 'DeleteTopics', "0-6", flexible='4+',
    request=(
        ('topics', '[]DeleteTopicState', '6+', (
            ('name', 'string', '6+', {'nullable': '6+', 'default': None}),
            ('topic_id', 'uuid', '6+'),
        )),
        ('topic_names', '[]string', '0-5'),
        ('timeout_ms', 'int32', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '1+'),
        ('responses', '[]DeletableTopicResult', '0+', (
            ('name', 'string', '0+', {'nullable': '6+'}),
            ('topic_id', 'uuid', '6+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '5+', {'nullable': '5+', 'default': None}),
        )),
    ),
)
API(21, 'DeleteRecords', "0-2", flexible='2+',
    request=(
        ('topics', '[]DeleteRecordsTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]DeleteRecordsPartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('offset', 'int64', '0+'),
            )),
        )),
        ('timeout_ms', 'int32', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('topics', '[]DeleteRecordsTopicResult', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]DeleteRecordsPartitionResult', '0+', (
                ('partition_index', 'int32', '0+'),
                ('low_watermark', 'int64', '0+'),
                ('error_code', 'int16', '0+'),
            )),
        )),
    ),
)
API(22, 'InitProducerId', "0-6", flexible='2+',
    request=(
        ('transactional_id', 'string', '0+', {'nullable': '0+'}),
        ('transaction_timeout_ms', 'int32', '0+'),
        ('producer_id', 'int64', '3+', {'default': -1}),
        ('producer_epoch', 'int16', '3+', {'default': -1}),
        ('enable2_pc', 'bool', '6+', {'default': False}),
        ('keep_prepared_txn', 'bool', '6+', {'default': False}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('producer_id', 'int64', '0+', {'default': -1}),
        ('producer_epoch', 'int16', '0+'),
        ('ongoing_txn_producer_id', 'int64', '6+', {'default': -1}),
        ('ongoing_txn_producer_epoch', 'int16', '6+', {'default': -1}),
    ),
)
API(23, 'OffsetForLeaderEpoch', "0-4", flexible='4+',
    request=(
        ('replica_id', 'int32', '3+', {'default': -2}),
        ('topics', '[]OffsetForLeaderTopic', '0+', (
            ('topic', 'string', '0+'),
            ('partitions', '[]OffsetForLeaderPartition', '0+', (
                ('partition', 'int32', '0+'),
                ('current_leader_epoch', 'int32', '2+', {'default': -1}),
                ('leader_epoch', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '2+'),
        ('topics', '[]OffsetForLeaderTopicResult', '0+', (
            ('topic', 'string', '0+'),
            ('partitions', '[]EpochEndOffset', '0+', (
                ('error_code', 'int16', '0+'),
                ('partition', 'int32', '0+'),
                ('leader_epoch', 'int32', '1+', {'default': -1}),
                ('end_offset', 'int64', '0+', {'default': -1}),
            )),
        )),
    ),
)
API(24, 'AddPartitionsToTxn', "0-5", flexible='3+',
    request=(
        ('transactions', '[]AddPartitionsToTxnTransaction', '4+', (
            ('transactional_id', 'string', '4+'),
            ('producer_id', 'int64', '4+'),
            ('producer_epoch', 'int16', '4+'),
            ('verify_only', 'bool', '4+', {'default': False}),
            ('topics', '[]AddPartitionsToTxnTopic', '4+', (
                ('name', 'string', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
        ('v3_and_below_transactional_id', 'string', '0-3'),
        ('v3_and_below_producer_id', 'int64', '0-3'),
        ('v3_and_below_producer_epoch', 'int16', '0-3'),
        ('v3_and_below_topics', '[]AddPartitionsToTxnTopic', '0-3', (
            ('name', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '4+'),
        ('results_by_transaction', '[]AddPartitionsToTxnResult', '4+', (
            ('transactional_id', 'string', '4+'),
            ('topic_results', '[]AddPartitionsToTxnTopicResult', '4+', (
                ('name', 'string', '0+'),
                ('results_by_partition', '[]AddPartitionsToTxnPartitionResult', '0+', (
                    ('partition_index', 'int32', '0+'),
                    ('partition_error_code', 'int16', '0+'),
                )),
            )),
        )),
        ('results_by_topic_v3_and_below', '[]AddPartitionsToTxnTopicResult', '0-3', (
            ('name', 'string', '0+'),
            ('results_by_partition', '[]AddPartitionsToTxnPartitionResult', '0+', (
                ('partition_index', 'int32', '0+'),
                ('partition_error_code', 'int16', '0+'),
            )),
        )),
    ),
)
API(25, 'AddOffsetsToTxn', "0-4", flexible='3+',
    request=(
        ('transactional_id', 'string', '0+'),
        ('producer_id', 'int64', '0+'),
        ('producer_epoch', 'int16', '0+'),
        ('group_id', 'string', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
    ),
)
API(26, 'EndTxn', "0-5", flexible='3+',
    request=(
        ('transactional_id', 'string', '0+'),
        ('producer_id', 'int64', '0+'),
        ('producer_epoch', 'int16', '0+'),
        ('committed', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('producer_id', 'int64', '5+', {'default': -1}),
        ('producer_epoch', 'int16', '5+', {'default': -1}),
    ),
)
API(27, 'WriteTxnMarkers', "0-2", flexible='1+',
    request=(
        ('markers', '[]WritableTxnMarker', '0+', (
            ('producer_id', 'int64', '0+'),
            ('producer_epoch', 'int16', '0+'),
            ('transaction_result', 'bool', '0+'),
            ('topics', '[]WritableTxnMarkerTopic', '0+', (
                ('name', 'string', '0+'),
                ('partition_indexes', '[]int32', '0+'),
            )),
            ('coordinator_epoch', 'int32', '0+'),
            ('transaction_version', 'int8', '2+', {'default': 0}),
        )),
    ),
    response=(
        ('markers', '[]WritableTxnMarkerResult', '0+', (
            ('producer_id', 'int64', '0+'),
            ('topics', '[]WritableTxnMarkerTopicResult', '0+', (
                ('name', 'string', '0+'),
                ('partitions', '[]WritableTxnMarkerPartitionResult', '0+', (
                    ('partition_index', 'int32', '0+'),
                    ('error_code', 'int16', '0+'),
                )),
            )),
        )),
    ),
)
API(28, 'TxnOffsetCommit', "0-5", flexible='3+',
    request=(
        ('transactional_id', 'string', '0+'),
        ('group_id', 'string', '0+'),
        ('producer_id', 'int64', '0+'),
        ('producer_epoch', 'int16', '0+'),
        ('generation_id', 'int32', '3+', {'default': -1}),
        ('member_id', 'string', '3+', {'default': ''}),
        ('group_instance_id', 'string', '3+', {'nullable': '3+', 'default': None}),
        ('topics', '[]TxnOffsetCommitRequestTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]TxnOffsetCommitRequestPartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('committed_offset', 'int64', '0+'),
                ('committed_leader_epoch', 'int32', '2+', {'default': -1}),
                ('committed_metadata', 'string', '0+', {'nullable': '0+'}),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('topics', '[]TxnOffsetCommitResponseTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]TxnOffsetCommitResponsePartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
            )),
        )),
    ),
)
API(29, 'DescribeAcls', "0-3", flexible='2+',
    request=(
        ('resource_type_filter', 'int8', '0+'),
        ('resource_name_filter', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('pattern_type_filter', 'int8', '1+', {'default': 3}),
        ('principal_filter', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('host_filter', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('operation', 'int8', '0+'),
        ('permission_type', 'int8', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('resources', '[]DescribeAclsResource', '0+', (
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
            ('pattern_type', 'int8', '1+', {'default': 3}),
            ('acls', '[]AclDescription', '0+', (
                ('principal', 'string', '0+'),
                ('host', 'string', '0+'),
                ('operation', 'int8', '0+'),
                ('permission_type', 'int8', '0+'),
            )),
        )),
    ),
)
API(30, 'CreateAcls', "0-3", flexible='2+',
    request=(
        ('creations', '[]AclCreation', '0+', (
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
            ('resource_pattern_type', 'int8', '1+', {'default': 3}),
            ('principal', 'string', '0+'),
            ('host', 'string', '0+'),
            ('operation', 'int8', '0+'),
            ('permission_type', 'int8', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('results', '[]AclCreationResult', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        )),
    ),
)
API(31, 'DeleteAcls', "0-3", flexible='2+',
    request=(
        ('filters', '[]DeleteAclsFilter', '0+', (
            ('resource_type_filter', 'int8', '0+'),
            ('resource_name_filter', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('pattern_type_filter', 'int8', '1+', {'default': 3}),
            ('principal_filter', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('host_filter', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('operation', 'int8', '0+'),
            ('permission_type', 'int8', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('filter_results', '[]DeleteAclsFilterResult', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('matching_acls', '[]DeleteAclsMatchingAcl', '0+', (
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('resource_type', 'int8', '0+'),
                ('resource_name', 'string', '0+'),
                ('pattern_type', 'int8', '1+', {'default': 3}),
                ('principal', 'string', '0+'),
                ('host', 'string', '0+'),
                ('operation', 'int8', '0+'),
                ('permission_type', 'int8', '0+'),
            )),
        )),
    ),
)
API(32, 'DescribeConfigs', "0-4", flexible='4+',
    request=(
        ('resources', '[]DescribeConfigsResource', '0+', (
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
            ('configuration_keys', '[]string', '0+', {'nullable': '0+'}),
        )),
        ('include_synonyms', 'bool', '1+', {'default': False}),
        ('include_documentation', 'bool', '3+', {'default': False}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('results', '[]DescribeConfigsResult', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+'}),
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
            ('configs', '[]DescribeConfigsResourceResult', '0+', (
                ('name', 'string', '0+'),
                ('value', 'string', '0+', {'nullable': '0+'}),
                ('read_only', 'bool', '0+'),
                ('is_default', 'bool', '0'),
                ('config_source', 'int8', '1+', {'default': -1}),
                ('is_sensitive', 'bool', '0+'),
                ('synonyms', '[]DescribeConfigsSynonym', '1+', (
                    ('name', 'string', '1+'),
                    ('value', 'string', '1+', {'nullable': '0+'}),
                    ('source', 'int8', '1+'),
                )),
                ('config_type', 'int8', '3+', {'default': 0}),
                ('documentation', 'string', '3+', {'nullable': '0+'}),
            )),
        )),
    ),
)
API(33, 'AlterConfigs', "0-2", flexible='2+',
    request=(
        ('resources', '[]AlterConfigsResource', '0+', (
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
            ('configs', '[]AlterableConfig', '0+', (
                ('name', 'string', '0+'),
                ('value', 'string', '0+', {'nullable': '0+'}),
            )),
        )),
        ('validate_only', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('responses', '[]AlterConfigsResourceResponse', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+'}),
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
        )),
    ),
)
API(34, 'AlterReplicaLogDirs', "1-2", flexible='2+',
    request=(
        ('dirs', '[]AlterReplicaLogDir', '0+', (
            ('path', 'string', '0+'),
            ('topics', '[]AlterReplicaLogDirTopic', '0+', (
                ('name', 'string', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('results', '[]AlterReplicaLogDirTopicResult', '0+', (
            ('topic_name', 'string', '0+'),
            ('partitions', '[]AlterReplicaLogDirPartitionResult', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
            )),
        )),
    ),
)
API(35, 'DescribeLogDirs', "1-5", flexible='2+',
    request=(
        ('topics', '[]DescribableLogDirTopic', '0+', {'nullable': '0+'}, (
            ('topic', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '3+'),
        ('results', '[]DescribeLogDirsResult', '0+', (
            ('error_code', 'int16', '0+'),
            ('log_dir', 'string', '0+'),
            ('topics', '[]DescribeLogDirsTopic', '0+', (
                ('name', 'string', '0+'),
                ('partitions', '[]DescribeLogDirsPartition', '0+', (
                    ('partition_index', 'int32', '0+'),
                    ('partition_size', 'int64', '0+'),
                    ('offset_lag', 'int64', '0+'),
                    ('is_future_key', 'bool', '0+'),
                )),
            )),
            ('total_bytes', 'int64', '4+', {'default': -1}),
            ('usable_bytes', 'int64', '4+', {'default': -1}),
            ('is_cordoned', 'bool', '5+'),
        )),
    ),
)
API(36, 'SaslAuthenticate', "0-2", flexible='2+',
    request=(
        ('auth_bytes', 'bytes', '0+'),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('auth_bytes', 'bytes', '0+'),
        ('session_lifetime_ms', 'int64', '1+'),
    ),
)
API(37, 'CreatePartitions', "0-3", flexible='2+',
    request=(
        ('topics', '[]CreatePartitionsTopic', '0+', (
            ('name', 'string', '0+'),
            ('count', 'int32', '0+'),
            ('assignments', '[]CreatePartitionsAssignment', '0+', {'nullable': '0+'}, (
                ('broker_ids', '[]int32', '0+'),
            )),
        )),
        ('timeout_ms', 'int32', '0+'),
        ('validate_only', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('results', '[]CreatePartitionsTopicResult', '0+', (
            ('name', 'string', '0+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        )),
    ),
)
API(38, 'CreateDelegationToken', "1-3", flexible='2+',
    request=(
        ('owner_principal_type', 'string', '3+', {'nullable': '3+', 'default': None}),
        ('owner_principal_name', 'string', '3+', {'nullable': '3+', 'default': None}),
        ('renewers', '[]CreatableRenewers', '0+', (
            ('principal_type', 'string', '0+'),
            ('principal_name', 'string', '0+'),
        )),
        ('max_lifetime_ms', 'int64', '0+'),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('principal_type', 'string', '0+'),
        ('principal_name', 'string', '0+'),
        ('token_requester_principal_type', 'string', '3+'),
        ('token_requester_principal_name', 'string', '3+'),
        ('issue_timestamp_ms', 'int64', '0+'),
        ('expiry_timestamp_ms', 'int64', '0+'),
        ('max_timestamp_ms', 'int64', '0+'),
        ('token_id', 'string', '0+'),
        ('hmac', 'bytes', '0+'),
        ('throttle_time_ms', 'int32', '0+'),
    ),
)
API(39, 'RenewDelegationToken', "1-2", flexible='2+',
    request=(
        ('hmac', 'bytes', '0+'),
        ('renew_period_ms', 'int64', '0+'),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('expiry_timestamp_ms', 'int64', '0+'),
        ('throttle_time_ms', 'int32', '0+'),
    ),
)
API(40, 'ExpireDelegationToken', "1-2", flexible='2+',
    request=(
        ('hmac', 'bytes', '0+'),
        ('expiry_time_period_ms', 'int64', '0+'),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('expiry_timestamp_ms', 'int64', '0+'),
        ('throttle_time_ms', 'int32', '0+'),
    ),
)
API(41, 'DescribeDelegationToken', "1-3", flexible='2+',
    request=(
        ('owners', '[]DescribeDelegationTokenOwner', '0+', {'nullable': '0+'}, (
            ('principal_type', 'string', '0+'),
            ('principal_name', 'string', '0+'),
        )),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('tokens', '[]DescribedDelegationToken', '0+', (
            ('principal_type', 'string', '0+'),
            ('principal_name', 'string', '0+'),
            ('token_requester_principal_type', 'string', '3+'),
            ('token_requester_principal_name', 'string', '3+'),
            ('issue_timestamp', 'int64', '0+'),
            ('expiry_timestamp', 'int64', '0+'),
            ('max_timestamp', 'int64', '0+'),
            ('token_id', 'string', '0+'),
            ('hmac', 'bytes', '0+'),
            ('renewers', '[]DescribedDelegationTokenRenewer', '0+', (
                ('principal_type', 'string', '0+'),
                ('principal_name', 'string', '0+'),
            )),
        )),
        ('throttle_time_ms', 'int32', '0+'),
    ),
)
API(42, 'DeleteGroups', "0-2", flexible='2+',
    request=(
        ('groups_names', '[]string', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('results', '[]DeletableGroupResult', '0+', (
            ('group_id', 'string', '0+'),
            ('error_code', 'int16', '0+'),
        )),
    ),
)
API(44, 'IncrementalAlterConfigs', "0-1", flexible='1+',
    request=(
        ('resources', '[]AlterConfigsResource', '0+', (
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
            ('configs', '[]AlterableConfig', '0+', (
                ('name', 'string', '0+'),
                ('config_operation', 'int8', '0+'),
                ('value', 'string', '0+', {'nullable': '0+'}),
            )),
        )),
        ('validate_only', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('responses', '[]AlterConfigsResourceResponse', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+'}),
            ('resource_type', 'int8', '0+'),
            ('resource_name', 'string', '0+'),
        )),
    ),
)
API(47, 'OffsetDelete', "0", flexible='none',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]OffsetDeleteRequestTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]OffsetDeleteRequestPartition', '0+', (
                ('partition_index', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('throttle_time_ms', 'int32', '0+'),
        ('topics', '[]OffsetDeleteResponseTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]OffsetDeleteResponsePartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
            )),
        )),
    ),
)
# The voter/observer shape, Kafka's `ReplicaState` common struct (shared by both lists).
_QUORUM_REPLICA_STATE = (
    ('replica_id', 'int32', '0+'),
    ('replica_directory_id', 'uuid', '2+'),
    ('log_end_offset', 'int64', '0+'),
    ('last_fetch_timestamp', 'int64', '1+', {'default': -1}),
    ('last_caught_up_timestamp', 'int64', '1+', {'default': -1}),
)
API(48, 'DescribeClientQuotas', "0-1", flexible='1+',
    request=(
        ('components', '[]ComponentData', '0+', (
            ('entity_type', 'string', '0+'),
            ('match_type', 'int8', '0+'),
            ('match', 'string', '0+', {'nullable': '0+', 'default': None}),
        )),
        ('strict', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('entries', '[]EntryData', '0+', {'nullable': '0+'}, (
            ('entity', '[]EntityData', '0+', (
                ('entity_type', 'string', '0+'),
                ('entity_name', 'string', '0+', {'nullable': '0+', 'default': None}),
            )),
            ('values', '[]ValueData', '0+', (
                ('key', 'string', '0+'),
                ('value', 'float64', '0+'),
            )),
        )),
    ),
)
API(49, 'AlterClientQuotas', "0-1", flexible='1+',
    request=(
        ('entries', '[]EntryData', '0+', (
            ('entity', '[]EntityData', '0+', (
                ('entity_type', 'string', '0+'),
                ('entity_name', 'string', '0+', {'nullable': '0+', 'default': None}),
            )),
            ('ops', '[]OpData', '0+', (
                ('key', 'string', '0+'),
                ('value', 'float64', '0+'),
                ('remove', 'bool', '0+'),
            )),
        )),
        ('validate_only', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('entries', '[]EntryData', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('entity', '[]EntityData', '0+', (
                ('entity_type', 'string', '0+'),
                ('entity_name', 'string', '0+', {'nullable': '0+', 'default': None}),
            )),
        )),
    ),
)
API(50, 'DescribeUserScramCredentials', "0", flexible='0+',
    request=(
        ('users', '[]UserName', '0+', {'nullable': '0+'}, (
            ('name', 'string', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('results', '[]DescribeUserScramCredentialsResult', '0+', (
            ('user', 'string', '0+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('credential_infos', '[]CredentialInfo', '0+', (
                ('mechanism', 'int8', '0+'),
                ('iterations', 'int32', '0+'),
            )),
        )),
    ),
)
API(51, 'AlterUserScramCredentials', "0", flexible='0+',
    request=(
        ('deletions', '[]ScramCredentialDeletion', '0+', (
            ('name', 'string', '0+'),
            ('mechanism', 'int8', '0+'),
        )),
        ('upsertions', '[]ScramCredentialUpsertion', '0+', (
            ('name', 'string', '0+'),
            ('mechanism', 'int8', '0+'),
            ('iterations', 'int32', '0+'),
            ('salt', 'bytes', '0+'),
            ('salted_password', 'bytes', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('results', '[]AlterUserScramCredentialsResult', '0+', (
            ('user', 'string', '0+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        )),
    ),
)
API(55, 'DescribeQuorum', "0-2", flexible='0+',
    request=(
        ('topics', '[]TopicData', '0+', (
            ('topic_name', 'string', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '2+', {'nullable': '2+', 'default': None}),
        ('topics', '[]TopicData', '0+', (
            ('topic_name', 'string', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '2+', {'nullable': '2+', 'default': None}),
                ('leader_id', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
                ('high_watermark', 'int64', '0+'),
                ('current_voters', '[]ReplicaState', '0+', _QUORUM_REPLICA_STATE),
                ('observers', '[]ReplicaState', '0+', _QUORUM_REPLICA_STATE),
            )),
        )),
        ('nodes', '[]Node', '2+', (
            ('node_id', 'int32', '2+'),
            ('listeners', '[]Listener', '2+', (
                ('name', 'string', '2+'),
                ('host', 'string', '2+'),
                ('port', 'uint16', '2+'),
            )),
        )),
    ),
)
API(43, 'ElectLeaders', "0-2", flexible='2+',
    request=(
        ('election_type', 'int8', '1+'),
        ('topic_partitions', '[]TopicPartitions', '0+', {'nullable': '0+'}, (
            ('topic', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('timeout_ms', 'int32', '0+', {'default': 60000}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '1+'),
        ('replica_election_results', '[]ReplicaElectionResult', '0+', (
            ('topic', 'string', '0+'),
            ('partition_result', '[]PartitionResult', '0+', (
                ('partition_id', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            )),
        )),
    ),
)
API(45, 'AlterPartitionReassignments', "0-1", flexible='0+',
    request=(
        ('timeout_ms', 'int32', '0+', {'default': 60000}),
        ('allow_replication_factor_change', 'bool', '1+', {'default': True}),
        ('topics', '[]ReassignableTopic', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]ReassignablePartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('replicas', '[]int32', '0+', {'nullable': '0+', 'default': None}),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('allow_replication_factor_change', 'bool', '1+', {'default': True}),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+'}),
        ('responses', '[]ReassignableTopicResponse', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]ReassignablePartitionResponse', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+'}),
            )),
        )),
    ),
)
API(46, 'ListPartitionReassignments', "0", flexible='0+',
    request=(
        ('timeout_ms', 'int32', '0+', {'default': 60000}),
        ('topics', '[]ListPartitionReassignmentsTopics', '0+', {'nullable': '0+', 'default': None}, (
            ('name', 'string', '0+'),
            ('partition_indexes', '[]int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+'}),
        ('topics', '[]OngoingTopicReassignment', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]OngoingPartitionReassignment', '0+', (
                ('partition_index', 'int32', '0+'),
                ('replicas', '[]int32', '0+'),
                ('adding_replicas', '[]int32', '0+'),
                ('removing_replicas', '[]int32', '0+'),
            )),
        )),
    ),
)
API(56, 'AlterPartition', "0-3", flexible='0+',
    # Kafka 4.0 dropped request versions 0-1 (topic names); 3.9's files define them.
    request=(
        ('broker_id', 'int32', '0+'),
        ('broker_epoch', 'int64', '0+', {'default': -1}),
        ('topics', '[]TopicData', '0+', (
            ('topic_name', 'string', '0-1'),
            ('topic_id', 'uuid', '2+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
                ('new_isr', '[]int32', '0-2'),
                ('new_isr_with_epochs', '[]BrokerState', '3+', (
                    ('broker_id', 'int32', '3+'),
                    ('broker_epoch', 'int64', '3+', {'default': -1}),
                )),
                ('leader_recovery_state', 'int8', '1+', {'default': 0}),
                ('partition_epoch', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('topics', '[]TopicData', '0+', (
            ('topic_name', 'string', '0-1'),
            ('topic_id', 'uuid', '2+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('leader_id', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
                ('isr', '[]int32', '0+'),
                ('leader_recovery_state', 'int8', '1+', {'default': 0}),
                ('partition_epoch', 'int32', '0+'),
            )),
        )),
    ),
)
API(57, 'UpdateFeatures', "0-2", flexible='0+',
    request=(
        ('timeout_ms', 'int32', '0+', {'default': 60000}),
        ('feature_updates', '[]FeatureUpdateKey', '0+', (
            ('feature', 'string', '0+'),
            ('max_version_level', 'int16', '0+'),
            ('allow_downgrade', 'bool', '0'),
            ('upgrade_type', 'int8', '1+', {'default': 1}),
        )),
        ('validate_only', 'bool', '1+', {'default': False}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('results', '[]UpdatableFeatureResult', '0-1', (
            ('feature', 'string', '0+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        )),
    ),
)
API(58, 'Envelope', "0", flexible='0+',
    request=(
        ('request_data', 'bytes', '0+'),
        ('request_principal', 'bytes', '0+', {'nullable': '0+', 'default': None}),
        ('client_host_address', 'bytes', '0+'),
    ),
    response=(
        ('response_data', 'bytes', '0+', {'nullable': '0+', 'default': None}),
        ('error_code', 'int16', '0+'),
    ),
)
API(60, 'DescribeCluster', "0-2", flexible='0+',
    request=(
        ('include_cluster_authorized_operations', 'bool', '0+'),
        ('endpoint_type', 'int8', '1+', {'default': 1}),
        ('include_fenced_brokers', 'bool', '2+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('endpoint_type', 'int8', '1+', {'default': 1}),
        ('cluster_id', 'string', '0+'),
        ('controller_id', 'int32', '0+', {'default': -1}),
        ('brokers', '[]DescribeClusterBroker', '0+', (
            ('broker_id', 'int32', '0+'),
            ('host', 'string', '0+'),
            ('port', 'int32', '0+'),
            ('rack', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('is_fenced', 'bool', '2+'),
        )),
        ('cluster_authorized_operations', 'int32', '0+', {'default': -2147483648}),
    ),
)
API(62, 'BrokerRegistration', "0-4", flexible='0+',
    request=(
        ('broker_id', 'int32', '0+'),
        ('cluster_id', 'string', '0+'),
        ('incarnation_id', 'uuid', '0+'),
        ('listeners', '[]Listener', '0+', (
            ('name', 'string', '0+'),
            ('host', 'string', '0+'),
            ('port', 'uint16', '0+'),
            ('security_protocol', 'int16', '0+'),
        )),
        ('features', '[]Feature', '0+', (
            ('name', 'string', '0+'),
            ('min_supported_version', 'int16', '0+'),
            ('max_supported_version', 'int16', '0+'),
        )),
        ('rack', 'string', '0+', {'nullable': '0+'}),
        ('is_migrating_zk_broker', 'bool', '1+', {'default': False}),
        ('log_dirs', '[]uuid', '2+'),
        ('previous_broker_epoch', 'int64', '3+', {'default': -1}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('broker_epoch', 'int64', '0+', {'default': -1}),
    ),
)
API(63, 'BrokerHeartbeat', "0-2", flexible='0+',
    request=(
        ('broker_id', 'int32', '0+'),
        ('broker_epoch', 'int64', '0+', {'default': -1}),
        ('current_metadata_offset', 'int64', '0+'),
        ('want_fence', 'bool', '0+'),
        ('want_shut_down', 'bool', '0+'),
        ('offline_log_dirs', '[]uuid', '1+', {'tag': 0}),
        ('cordoned_log_dirs', '[]uuid', '2+', {'nullable': '2+', 'default': None, 'tag': 1}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('is_caught_up', 'bool', '0+', {'default': False}),
        ('is_fenced', 'bool', '0+', {'default': True}),
        ('should_shut_down', 'bool', '0+'),
    ),
)
#: the response of UnregisterBroker, AddRaftVoter and RemoveRaftVoter: a top-level error code and message
_THROTTLE_ERROR_MESSAGE = (
    ('throttle_time_ms', 'int32', '0+'),
    ('error_code', 'int16', '0+'),
    ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
)
# UnregisterBroker: an operator removes a decommissioned broker's registration (``kafka-cluster unregister``);
# brokers forward it to the active controller.
API(64, 'UnregisterBroker', "0", flexible='0+',
    request=(
        ('broker_id', 'int32', '0+'),
    ),
    response=_THROTTLE_ERROR_MESSAGE,
)
API(61, 'DescribeProducers', "0", flexible='0+',
    request=(
        ('topics', '[]TopicRequest', '0+', (
            ('name', 'string', '0+'),
            ('partition_indexes', '[]int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('topics', '[]TopicResponse', '0+', (
            ('name', 'string', '0+'),
            ('partitions', '[]PartitionResponse', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('active_producers', '[]ProducerState', '0+', (
                    ('producer_id', 'int64', '0+'),
                    ('producer_epoch', 'int32', '0+'),
                    ('last_sequence', 'int32', '0+', {'default': -1}),
                    ('last_timestamp', 'int64', '0+', {'default': -1}),
                    ('coordinator_epoch', 'int32', '0+'),
                    ('current_txn_start_offset', 'int64', '0+', {'default': -1}),
                )),
            )),
        )),
    ),
)
API(65, 'DescribeTransactions', "0", flexible='0+',
    request=(
        ('transactional_ids', '[]string', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('transaction_states', '[]TransactionState', '0+', (
            ('error_code', 'int16', '0+'),
            ('transactional_id', 'string', '0+'),
            ('transaction_state', 'string', '0+'),
            ('transaction_timeout_ms', 'int32', '0+'),
            ('transaction_start_time_ms', 'int64', '0+'),
            ('producer_id', 'int64', '0+'),
            ('producer_epoch', 'int16', '0+'),
            ('topics', '[]TopicData', '0+', (
                ('topic', 'string', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
    ),
)
API(66, 'ListTransactions', "0-2", flexible='0+',
    request=(
        ('state_filters', '[]string', '0+'),
        ('producer_id_filters', '[]int64', '0+'),
        ('duration_filter', 'int64', '1+', {'default': -1}),
        ('transactional_id_pattern', 'string', '2+', {'nullable': '2+', 'default': None}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('unknown_state_filters', '[]string', '0+'),
        ('transaction_states', '[]TransactionState', '0+', (
            ('transactional_id', 'string', '0+'),
            ('producer_id', 'int64', '0+'),
            ('transaction_state', 'string', '0+'),
        )),
    ),
)
API(67, 'AllocateProducerIds', "0", flexible='0+',
    request=(
        ('broker_id', 'int32', '0+'),
        ('broker_epoch', 'int64', '0+', {'default': -1}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('producer_id_start', 'int64', '0+'),
        ('producer_id_len', 'int32', '0+'),
    ),
)
API(73, 'AssignReplicasToDirs', "0", flexible='0+',
    request=(
        ('broker_id', 'int32', '0+'),
        ('broker_epoch', 'int64', '0+', {'default': -1}),
        ('directories', '[]DirectoryData', '0+', (
            ('id', 'uuid', '0+'),
            ('topics', '[]TopicData', '0+', (
                ('topic_id', 'uuid', '0+'),
                ('partitions', '[]PartitionData', '0+', (
                    ('partition_index', 'int32', '0+'),
                )),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('directories', '[]DirectoryData', '0+', (
            ('id', 'uuid', '0+'),
            ('topics', '[]TopicData', '0+', (
                ('topic_id', 'uuid', '0+'),
                ('partitions', '[]PartitionData', '0+', (
                    ('partition_index', 'int32', '0+'),
                    ('error_code', 'int16', '0+'),
                )),
            )),
        )),
    ),
)
API(68, 'ConsumerGroupHeartbeat', "0-1", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('member_id', 'string', '0+'),
        ('member_epoch', 'int32', '0+'),
        ('instance_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('rack_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('rebalance_timeout_ms', 'int32', '0+', {'default': -1}),
        ('subscribed_topic_names', '[]string', '0+', {'nullable': '0+', 'default': None}),
        ('subscribed_topic_regex', 'string', '1+', {'nullable': '1+', 'default': None}),
        ('server_assignor', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('topic_partitions', '[]TopicPartitions', '0+', {'nullable': '0+', 'default': None}, (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_epoch', 'int32', '0+'),
        ('heartbeat_interval_ms', 'int32', '0+'),
        ('assignment', 'Assignment', '0+', {'nullable': '0+', 'default': None}, (
            ('topic_partitions', '[]TopicPartitions', '0+', (
                ('topic_id', 'uuid', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
    ),
)
API(69, 'ConsumerGroupDescribe', "0-1", flexible='0+',
    request=(
        ('group_ids', '[]string', '0+'),
        ('include_authorized_operations', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('groups', '[]DescribedGroup', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('group_id', 'string', '0+'),
            ('group_state', 'string', '0+'),
            ('group_epoch', 'int32', '0+'),
            ('assignment_epoch', 'int32', '0+'),
            ('assignor_name', 'string', '0+'),
            ('members', '[]Member', '0+', (
                ('member_id', 'string', '0+'),
                ('instance_id', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('rack_id', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('member_epoch', 'int32', '0+'),
                ('client_id', 'string', '0+'),
                ('client_host', 'string', '0+'),
                ('subscribed_topic_names', '[]string', '0+'),
                ('subscribed_topic_regex', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('assignment', 'Assignment', '0+', (
                    ('topic_partitions', '[]TopicPartitions', '0+', (
                        ('topic_id', 'uuid', '0+'),
                        ('topic_name', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                )),
                ('target_assignment', 'Assignment', '0+', (
                    ('topic_partitions', '[]TopicPartitions', '0+', (
                        ('topic_id', 'uuid', '0+'),
                        ('topic_name', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                )),
                ('member_type', 'int8', '1+', {'default': -1}),
            )),
            ('authorized_operations', 'int32', '0+', {'default': -2147483648}),
        )),
    ),
)
API(75, 'DescribeTopicPartitions', "0", flexible='0+',
    request=(
        ('topics', '[]TopicRequest', '0+', (
            ('name', 'string', '0+'),
        )),
        ('response_partition_limit', 'int32', '0+', {'default': 2000}),
        ('cursor', 'Cursor', '0+', {'nullable': '0+', 'default': None}, (
            ('topic_name', 'string', '0+'),
            ('partition_index', 'int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('topics', '[]DescribeTopicPartitionsResponseTopic', '0+', (
            ('error_code', 'int16', '0+'),
            ('name', 'string', '0+', {'nullable': '0+'}),
            ('topic_id', 'uuid', '0+'),
            ('is_internal', 'bool', '0+', {'default': False}),
            ('partitions', '[]DescribeTopicPartitionsResponsePartition', '0+', (
                ('error_code', 'int16', '0+'),
                ('partition_index', 'int32', '0+'),
                ('leader_id', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+', {'default': -1}),
                ('replica_nodes', '[]int32', '0+'),
                ('isr_nodes', '[]int32', '0+'),
                ('eligible_leader_replicas', '[]int32', '0+', {'nullable': '0+', 'default': None}),
                ('last_known_elr', '[]int32', '0+', {'nullable': '0+', 'default': None}),
                ('offline_replicas', '[]int32', '0+'),
            )),
            ('topic_authorized_operations', 'int32', '0+', {'default': -2147483648}),
        )),
        ('next_cursor', 'Cursor', '0+', {'nullable': '0+', 'default': None}, (
            ('topic_name', 'string', '0+'),
            ('partition_index', 'int32', '0+'),
        )),
    ),
)
# KIP-932 share groups (Kafka 4.1+ stable versions; v0 was Kafka 4.0's early access, removed in 4.1).
API(76, 'ShareGroupHeartbeat', "1", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('member_id', 'string', '0+'),
        ('member_epoch', 'int32', '0+'),
        ('rack_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('subscribed_topic_names', '[]string', '0+', {'nullable': '0+', 'default': None}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_epoch', 'int32', '0+'),
        ('heartbeat_interval_ms', 'int32', '0+'),
        ('assignment', 'Assignment', '0+', {'nullable': '0+', 'default': None}, (
            ('topic_partitions', '[]TopicPartitions', '0+', (
                ('topic_id', 'uuid', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
    ),
)
API(77, 'ShareGroupDescribe', "1", flexible='0+',
    request=(
        ('group_ids', '[]string', '0+'),
        ('include_authorized_operations', 'bool', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('groups', '[]DescribedGroup', '0+', (
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            ('group_id', 'string', '0+'),
            ('group_state', 'string', '0+'),
            ('group_epoch', 'int32', '0+'),
            ('assignment_epoch', 'int32', '0+'),
            ('assignor_name', 'string', '0+'),
            ('members', '[]Member', '0+', (
                ('member_id', 'string', '0+'),
                ('rack_id', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('member_epoch', 'int32', '0+'),
                ('client_id', 'string', '0+'),
                ('client_host', 'string', '0+'),
                ('subscribed_topic_names', '[]string', '0+'),
                ('assignment', 'Assignment', '0+', (
                    ('topic_partitions', '[]TopicPartitions', '0+', (
                        ('topic_id', 'uuid', '0+'),
                        ('topic_name', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                )),
            )),
            ('authorized_operations', 'int32', '0+', {'default': -2147483648}),
        )),
    ),
)
_SHARE_ACK_BATCH = (
    ('first_offset', 'int64', '0+'),
    ('last_offset', 'int64', '0+'),
    ('acknowledge_types', '[]int8', '0+'),
)
_SHARE_NODE_ENDPOINTS = ('node_endpoints', '[]NodeEndpoint', '0+', (
    ('node_id', 'int32', '0+'),
    ('host', 'string', '0+'),
    ('port', 'int32', '0+'),
    ('rack', 'string', '0+', {'nullable': '0+', 'default': None}),
))
_SHARE_LEADER = ('current_leader', 'LeaderIdAndEpoch', '0+', (
    ('leader_id', 'int32', '0+'),
    ('leader_epoch', 'int32', '0+'),
))
API(78, 'ShareFetch', "1-2", flexible='0+',
    request=(
        ('group_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_id', 'string', '0+', {'nullable': '0+'}),
        ('share_session_epoch', 'int32', '0+'),
        ('max_wait_ms', 'int32', '0+'),
        ('min_bytes', 'int32', '0+'),
        ('max_bytes', 'int32', '0+', {'default': 0x7fffffff}),
        ('max_records', 'int32', '1+'),
        ('batch_size', 'int32', '1+'),
        ('share_acquire_mode', 'int8', '2+', {'default': 0}),
        ('is_renew_ack', 'bool', '2+', {'default': False}),
        ('topics', '[]FetchTopic', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]FetchPartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('partition_max_bytes', 'int32', '0'),
                ('acknowledgement_batches', '[]AcknowledgementBatch', '0+', _SHARE_ACK_BATCH),
            )),
        )),
        ('forgotten_topics_data', '[]ForgottenTopic', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('acquisition_lock_timeout_ms', 'int32', '1+'),
        ('responses', '[]ShareFetchableTopicResponse', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('acknowledge_error_code', 'int16', '0+'),
                ('acknowledge_error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
                _SHARE_LEADER,
                ('records', 'records', '0+', {'nullable': '0'}),
                ('acquired_records', '[]AcquiredRecords', '0+', (
                    ('first_offset', 'int64', '0+'),
                    ('last_offset', 'int64', '0+'),
                    ('delivery_count', 'int16', '0+'),
                )),
            )),
        )),
        _SHARE_NODE_ENDPOINTS,
    ),
)
API(79, 'ShareAcknowledge', "1-2", flexible='0+',
    request=(
        ('group_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_id', 'string', '0+', {'nullable': '0+'}),
        ('share_session_epoch', 'int32', '0+'),
        ('is_renew_ack', 'bool', '2+', {'default': False}),
        ('topics', '[]AcknowledgeTopic', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]AcknowledgePartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('acknowledgement_batches', '[]AcknowledgementBatch', '0+', _SHARE_ACK_BATCH),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('acquisition_lock_timeout_ms', 'int32', '2+'),
        ('responses', '[]ShareAcknowledgeTopicResponse', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
                _SHARE_LEADER,
            )),
        )),
        _SHARE_NODE_ENDPOINTS,
    ),
)
# KIP-932: what a share-partition's leader sends the share coordinator (the leader of its __share_group_state
# partition) to persist the share-partition's state.
API(85, 'WriteShareGroupState', "0-1", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]WriteStateData', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition', 'int32', '0+'),
                ('state_epoch', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
                ('start_offset', 'int64', '0+'),
                ('delivery_complete_count', 'int32', '1+', {'default': -1}),
                ('state_batches', '[]StateBatch', '0+', (
                    ('first_offset', 'int64', '0+'),
                    ('last_offset', 'int64', '0+'),
                    ('delivery_state', 'int8', '0+'),
                    ('delivery_count', 'int16', '0+'),
                )),
            )),
        )),
    ),
    response=(
        ('results', '[]WriteStateResult', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionResult', '0+', (
                ('partition', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
            )),
        )),
    ),
)
# KIP-853 voter changes, served on a controller listener (kafka-metadata-quorum add-controller / remove-controller;
# UpdateRaftVoter is what a voter sends its leader when its endpoints change).
_VOTER_LISTENER = (
    ('name', 'string', '0+'),
    ('host', 'string', '0+'),
    ('port', 'uint16', '0+'),
)
API(80, 'AddRaftVoter', "0-1", flexible='0+',
    request=(
        ('cluster_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('timeout_ms', 'int32', '0+'),
        ('voter_id', 'int32', '0+'),
        ('voter_directory_id', 'uuid', '0+'),
        ('listeners', '[]Listener', '0+', _VOTER_LISTENER),
        ('ack_when_committed', 'bool', '1+', {'default': True}),
    ),
    response=_THROTTLE_ERROR_MESSAGE,
)
API(81, 'RemoveRaftVoter', "0", flexible='0+',
    request=(
        ('cluster_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('voter_id', 'int32', '0+'),
        ('voter_directory_id', 'uuid', '0+'),
    ),
    response=_THROTTLE_ERROR_MESSAGE,
)
API(82, 'UpdateRaftVoter', "0", flexible='0+',
    request=(
        ('cluster_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('current_leader_epoch', 'int32', '0+'),
        ('voter_id', 'int32', '0+'),
        ('voter_directory_id', 'uuid', '0+'),
        ('listeners', '[]Listener', '0+', _VOTER_LISTENER),
        ('k_raft_version_feature', 'KRaftVersionFeature', '0+', (
            ('min_supported_version', 'int16', '0+'),
            ('max_supported_version', 'int16', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('current_leader', 'CurrentLeader', '0+', {'tag': 0}, (
            ('leader_id', 'int32', '0+', {'default': -1}),
            ('leader_epoch', 'int32', '0+', {'default': -1}),
            ('host', 'string', '0+'),
            ('port', 'int32', '0+'),
        )),
    ),
)
# KIP-714 client metrics (Kafka 3.7+): a client asks which metrics to push, and pushes them as OTLP MetricsData.
API(71, 'GetTelemetrySubscriptions', "0", flexible='0+',
    request=(
        ('client_instance_id', 'uuid', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('client_instance_id', 'uuid', '0+'),
        ('subscription_id', 'int32', '0+'),
        ('accepted_compression_types', '[]int8', '0+'),
        ('push_interval_ms', 'int32', '0+'),
        ('telemetry_max_bytes', 'int32', '0+'),
        ('delta_temporality', 'bool', '0+'),
        ('requested_metrics', '[]string', '0+'),
    ),
)
API(72, 'PushTelemetry', "0", flexible='0+',
    request=(
        ('client_instance_id', 'uuid', '0+'),
        ('subscription_id', 'int32', '0+'),
        ('terminating', 'bool', '0+'),
        ('compression_type', 'int8', '0+'),
        ('metrics', 'bytes', '0+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
    ),
)
# v0 was ListClientMetricsResources (KIP-714); v1 lists any config resource type (KIP-1142, Kafka 4.1+).
API(74, 'ListConfigResources', "0-1", flexible='0+',
    request=(
        ('resource_types', '[]int8', '1+'),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('config_resources', '[]ConfigResource', '0+', (
            ('resource_name', 'string', '0+'),
            ('resource_type', 'int8', '1+', {'default': 16}),
        )),
    ),
)
HEADER('RequestHeader', "0-2", flexible='2+', fields=(
    ('request_api_key', 'int16', '0+'),
    ('request_api_version', 'int16', '0+'),
    ('correlation_id', 'int32', '0+'),
    ('client_id', 'string', '1+', {'nullable': '1+'}),
))
HEADER('ResponseHeader', "0-1", flexible='1+', fields=(
    ('correlation_id', 'int32', '0+'),
))

from . import schemas_share_admin as _share_admin  # noqa: E402,F401 - KIP-932 state RPCs and offset admin APIs
from . import schemas_streams as _streams  # noqa: E402,F401 - KIP-1071 streams group APIs
