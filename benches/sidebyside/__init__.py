"""klog vs Apache Kafka 4.x side by side on one machine, in one run (issue 8).

``brokers`` starts each broker with the same settings, ``workloads`` lists what runs, ``runner`` drives Kafka's
own load generators (``javatools``) and confluent-kafka/asyncio ones (``pyload``) while ``procstat`` reads the
broker's CPU and memory from /proc, ``machine`` measures this machine's limits, and ``report`` writes
docs/performance.md with charts. Entry point: ``tools/bench-sidebyside.sh`` (``make sidebyside``).
"""
