"""The broker's configuration: Kafka's property names, defined in :mod:`klog.metadata.config` (below both the broker
and the controller, which validates topic configs with the same table) and re-exported here for the broker."""

from klog.metadata.config import (
    BROKER_KEYS as BROKER_KEYS,
    COMPRESSION_CODEC_IDS as COMPRESSION_CODEC_IDS,
    CONFIG_TYPE_CODES as CONFIG_TYPE_CODES,
    DYNAMIC_BROKER_KEYS as DYNAMIC_BROKER_KEYS,
    LISTEN_BACKLOG_DEFAULT as LISTEN_BACKLOG_DEFAULT,
    TOPIC_KEYS as TOPIC_KEYS,
    BrokerConfig as BrokerConfig,
    ConfigError as ConfigError,
    ConfigKey as ConfigKey,
    load_properties as load_properties,
    parse_overrides as parse_overrides,
    validate_topic_configs as validate_topic_configs,
)
