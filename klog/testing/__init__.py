"""Test helpers shipped with klog: a pytest fixture (``klog_broker``), a broker subprocess launcher and a
runner for Apache Kafka's Java CLI tools."""
