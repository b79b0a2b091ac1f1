"""klog-broker: a single-node broker speaking the Apache Kafka wire protocol (see server.py)."""
