"""KIP-1071's streams group APIs (StreamsGroupHeartbeat 88, StreamsGroupDescribe 89), transcribed from Apache Kafka
4.3.1's ``clients/src/main/resources/common/message/StreamsGroup{Heartbeat,Describe}{Request,Response}.json`` like
:mod:`klog.protocol.schemas` (imported at its end, so they land in the same ``API_DEFINITIONS``)."""

from __future__ import annotations

from .schema_tables import API

API(88, 'StreamsGroupHeartbeat', "0", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('member_id', 'string', '0+'),
        ('member_epoch', 'int32', '0+'),
        ('endpoint_information_epoch', 'int32', '0+'),
        ('instance_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('rack_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('rebalance_timeout_ms', 'int32', '0+', {'default': -1}),
        ('topology', 'Topology', '0+', {'nullable': '0+', 'default': None}, (
            ('epoch', 'int32', '0+'),
            ('subtopologies', '[]Subtopology', '0+', (
                ('subtopology_id', 'string', '0+'),
                ('source_topics', '[]string', '0+'),
                ('source_topic_regex', '[]string', '0+'),
                ('state_changelog_topics', '[]TopicInfo', '0+', (
                    ('name', 'string', '0+'),
                    ('partitions', 'int32', '0+'),
                    ('replication_factor', 'int16', '0+'),
                    ('topic_configs', '[]KeyValue', '0+', (
                        ('key', 'string', '0+'),
                        ('value', 'string', '0+'),
                    )),
                )),
                ('repartition_sink_topics', '[]string', '0+'),
                ('repartition_source_topics', '[]TopicInfo', '0+', (
                    ('name', 'string', '0+'),
                    ('partitions', 'int32', '0+'),
                    ('replication_factor', 'int16', '0+'),
                    ('topic_configs', '[]KeyValue', '0+', (
                        ('key', 'string', '0+'),
                        ('value', 'string', '0+'),
                    )),
                )),
                ('copartition_groups', '[]CopartitionGroup', '0+', (
                    ('source_topics', '[]int16', '0+'),
                    ('source_topic_regex', '[]int16', '0+'),
                    ('repartition_source_topics', '[]int16', '0+'),
                )),
            )),
        )),
        ('active_tasks', '[]TaskIds', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('standby_tasks', '[]TaskIds', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('warmup_tasks', '[]TaskIds', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('process_id', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('user_endpoint', 'Endpoint', '0+', {'nullable': '0+', 'default': None}, (
            ('host', 'string', '0+'),
            ('port', 'uint16', '0+'),
        )),
        ('client_tags', '[]KeyValue', '0+', {'nullable': '0+', 'default': None}, (
            ('key', 'string', '0+'),
            ('value', 'string', '0+'),
        )),
        ('task_offsets', '[]TaskOffset', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partition', 'int32', '0+'),
            ('offset', 'int64', '0+'),
        )),
        ('task_end_offsets', '[]TaskOffset', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partition', 'int32', '0+'),
            ('offset', 'int64', '0+'),
        )),
        ('shutdown_application', 'bool', '0+', {'default': False}),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', {'nullable': '0+', 'default': None}),
        ('member_id', 'string', '0+'),
        ('member_epoch', 'int32', '0+'),
        ('heartbeat_interval_ms', 'int32', '0+'),
        ('acceptable_recovery_lag', 'int32', '0+'),
        ('task_offset_interval_ms', 'int32', '0+'),
        ('status', '[]Status', '0+', {'nullable': '0+'}, (
            ('status_code', 'int8', '0+'),
            ('status_detail', 'string', '0+'),
        )),
        ('active_tasks', '[]TaskIds', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('standby_tasks', '[]TaskIds', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('warmup_tasks', '[]TaskIds', '0+', {'nullable': '0+', 'default': None}, (
            ('subtopology_id', 'string', '0+'),
            ('partitions', '[]int32', '0+'),
        )),
        ('endpoint_information_epoch', 'int32', '0+'),
        ('partitions_by_user_endpoint', '[]EndpointToPartitions', '0+', {'nullable': '0+', 'default': None}, (
            ('user_endpoint', 'Endpoint', '0+', (
                ('host', 'string', '0+'),
                ('port', 'uint16', '0+'),
            )),
            ('active_partitions', '[]TopicPartition', '0+', (
                ('topic', 'string', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
            ('standby_partitions', '[]TopicPartition', '0+', (
                ('topic', 'string', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
    ),
)
API(89, 'StreamsGroupDescribe', "0", flexible='0+',
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
            ('topology', 'Topology', '0+', {'nullable': '0+', 'default': None}, (
                ('epoch', 'int32', '0+'),
                ('subtopologies', '[]Subtopology', '0+', {'nullable': '0+', 'default': None}, (
                    ('subtopology_id', 'string', '0+'),
                    ('source_topics', '[]string', '0+'),
                    ('repartition_sink_topics', '[]string', '0+'),
                    ('state_changelog_topics', '[]TopicInfo', '0+', (
                        ('name', 'string', '0+'),
                        ('partitions', 'int32', '0+'),
                        ('replication_factor', 'int16', '0+'),
                        ('topic_configs', '[]KeyValue', '0+', (
                            ('key', 'string', '0+'),
                            ('value', 'string', '0+'),
                        )),
                    )),
                    ('repartition_source_topics', '[]TopicInfo', '0+', (
                        ('name', 'string', '0+'),
                        ('partitions', 'int32', '0+'),
                        ('replication_factor', 'int16', '0+'),
                        ('topic_configs', '[]KeyValue', '0+', (
                            ('key', 'string', '0+'),
                            ('value', 'string', '0+'),
                        )),
                    )),
                )),
            )),
            ('members', '[]Member', '0+', (
                ('member_id', 'string', '0+'),
                ('member_epoch', 'int32', '0+'),
                ('instance_id', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('rack_id', 'string', '0+', {'nullable': '0+', 'default': None}),
                ('client_id', 'string', '0+'),
                ('client_host', 'string', '0+'),
                ('topology_epoch', 'int32', '0+'),
                ('process_id', 'string', '0+'),
                ('user_endpoint', 'Endpoint', '0+', {'nullable': '0+', 'default': None}, (
                    ('host', 'string', '0+'),
                    ('port', 'uint16', '0+'),
                )),
                ('client_tags', '[]KeyValue', '0+', (
                    ('key', 'string', '0+'),
                    ('value', 'string', '0+'),
                )),
                ('task_offsets', '[]TaskOffset', '0+', (
                    ('subtopology_id', 'string', '0+'),
                    ('partition', 'int32', '0+'),
                    ('offset', 'int64', '0+'),
                )),
                ('task_end_offsets', '[]TaskOffset', '0+', (
                    ('subtopology_id', 'string', '0+'),
                    ('partition', 'int32', '0+'),
                    ('offset', 'int64', '0+'),
                )),
                ('assignment', 'Assignment', '0+', (
                    ('active_tasks', '[]TaskIds', '0+', (
                        ('subtopology_id', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                    ('standby_tasks', '[]TaskIds', '0+', (
                        ('subtopology_id', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                    ('warmup_tasks', '[]TaskIds', '0+', (
                        ('subtopology_id', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                )),
                ('target_assignment', 'Assignment', '0+', (
                    ('active_tasks', '[]TaskIds', '0+', (
                        ('subtopology_id', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                    ('standby_tasks', '[]TaskIds', '0+', (
                        ('subtopology_id', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                    ('warmup_tasks', '[]TaskIds', '0+', (
                        ('subtopology_id', 'string', '0+'),
                        ('partitions', '[]int32', '0+'),
                    )),
                )),
                ('is_classic', 'bool', '0+'),
            )),
            ('authorized_operations', 'int32', '0+', {'default': -2147483648}),
        )),
    ),
)
