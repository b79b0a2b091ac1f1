"""KIP-932's share-group state RPCs between brokers (83, 84, 86, 87; WriteShareGroupState 85 is in ``schemas``)
and the share-group offset admin APIs (90-92), transcribed from Apache Kafka 4.3.1's message JSON files like
:mod:`klog.protocol.schemas` (imported at its end, so they land in the same ``API_DEFINITIONS``)."""

from __future__ import annotations

from .schema_tables import API

_NULLABLE_MESSAGE = {'nullable': '0+', 'default': None}
_PARTITION_RESULT = (
    ('partition', 'int32', '0+'),
    ('error_code', 'int16', '0+'),
    ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
)

API(83, 'InitializeShareGroupState', "0", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]InitializeStateData', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition', 'int32', '0+'),
                ('state_epoch', 'int32', '0+'),
                ('start_offset', 'int64', '0+'),
            )),
        )),
    ),
    response=(
        ('results', '[]InitializeStateResult', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionResult', '0+', _PARTITION_RESULT),
        )),
    ),
)
API(84, 'ReadShareGroupState', "0", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]ReadStateData', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('results', '[]ReadStateResult', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionResult', '0+', (
                *_PARTITION_RESULT,
                ('state_epoch', 'int32', '0+'),
                ('start_offset', 'int64', '0+'),
                ('state_batches', '[]StateBatch', '0+', (
                    ('first_offset', 'int64', '0+'),
                    ('last_offset', 'int64', '0+'),
                    ('delivery_state', 'int8', '0+'),
                    ('delivery_count', 'int16', '0+'),
                )),
            )),
        )),
    ),
)
API(86, 'DeleteShareGroupState', "0", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]DeleteStateData', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('results', '[]DeleteStateResult', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionResult', '0+', _PARTITION_RESULT),
        )),
    ),
)
API(87, 'ReadShareGroupStateSummary', "0-1", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]ReadStateSummaryData', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionData', '0+', (
                ('partition', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
            )),
        )),
    ),
    response=(
        ('results', '[]ReadStateSummaryResult', '0+', (
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]PartitionResult', '0+', (
                *_PARTITION_RESULT,
                ('state_epoch', 'int32', '0+'),
                ('leader_epoch', 'int32', '0+'),
                ('start_offset', 'int64', '0+'),
                ('delivery_complete_count', 'int32', '1+', {'default': -1}),
            )),
        )),
    ),
)
API(90, 'DescribeShareGroupOffsets', "0-1", flexible='0+',
    request=(
        ('groups', '[]DescribeShareGroupOffsetsRequestGroup', '0+', (
            ('group_id', 'string', '0+'),
            ('topics', '[]DescribeShareGroupOffsetsRequestTopic', '0+', {'nullable': '0+', 'default': None}, (
                ('topic_name', 'string', '0+'),
                ('partitions', '[]int32', '0+'),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('groups', '[]DescribeShareGroupOffsetsResponseGroup', '0+', (
            ('group_id', 'string', '0+'),
            ('topics', '[]DescribeShareGroupOffsetsResponseTopic', '0+', (
                ('topic_name', 'string', '0+'),
                ('topic_id', 'uuid', '0+'),
                ('partitions', '[]DescribeShareGroupOffsetsResponsePartition', '0+', (
                    ('partition_index', 'int32', '0+'),
                    ('start_offset', 'int64', '0+'),
                    ('leader_epoch', 'int32', '0+'),
                    ('lag', 'int64', '1+', {'default': -1}),
                    ('error_code', 'int16', '0+'),
                    ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
                )),
            )),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
        )),
    ),
)
API(91, 'AlterShareGroupOffsets', "0", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]AlterShareGroupOffsetsRequestTopic', '0+', (
            ('topic_name', 'string', '0+'),
            ('partitions', '[]AlterShareGroupOffsetsRequestPartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('start_offset', 'int64', '0+'),
            )),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
        ('responses', '[]AlterShareGroupOffsetsResponseTopic', '0+', (
            ('topic_name', 'string', '0+'),
            ('topic_id', 'uuid', '0+'),
            ('partitions', '[]AlterShareGroupOffsetsResponsePartition', '0+', (
                ('partition_index', 'int32', '0+'),
                ('error_code', 'int16', '0+'),
                ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
            )),
        )),
    ),
)
API(92, 'DeleteShareGroupOffsets', "0", flexible='0+',
    request=(
        ('group_id', 'string', '0+'),
        ('topics', '[]DeleteShareGroupOffsetsRequestTopic', '0+', (
            ('topic_name', 'string', '0+'),
        )),
    ),
    response=(
        ('throttle_time_ms', 'int32', '0+'),
        ('error_code', 'int16', '0+'),
        ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
        ('responses', '[]DeleteShareGroupOffsetsResponseTopic', '0+', (
            ('topic_name', 'string', '0+'),
            ('topic_id', 'uuid', '0+'),
            ('error_code', 'int16', '0+'),
            ('error_message', 'string', '0+', _NULLABLE_MESSAGE),
        )),
    ),
)
