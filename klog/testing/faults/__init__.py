"""Fault-injection suite (issue 17): does a cluster keep every acknowledged write under crashes, pauses,
network partitions, full disks and clock offsets? Jepsen's method, on one machine, against klog or Apache Kafka alike.

- :mod:`~klog.testing.faults.history`: the JSON-lines history (invocations, completions, fault events)
- :mod:`~klog.testing.faults.checker`: a pure function history + final read -> counts per anomaly
- :mod:`~klog.testing.faults.schedule`: seeded, reproducible fault schedules (seed -> timed steps)
- :mod:`~klog.testing.faults.netns`: network namespaces, veth pairs, a bridge, nftables drops/loss/duplication,
  each node's own small filesystem
- :mod:`~klog.testing.faults.cluster`: 3-5 nodes (Apache Kafka or klog-broker) in namespaces or on loopback,
  applying fault steps (SIGKILL/restart, SIGSTOP/SIGCONT, isolation, splits, delay/loss/duplication, a cut
  or flipped segment tail, a full disk, a node restarted with its wall clock off under libfaketime)
- :mod:`~klog.testing.faults.workload`: producer (confluent-kafka and klog's own client) and consumer processes
  logging into the history
- :mod:`~klog.testing.faults.explain`: a transactional finding's batches, markers and aborted-transaction index
  entries on every replica, as kafka-dump-log reads them
- :mod:`~klog.testing.faults.plot`: throughput and latency over time with the faults shaded (PNG)
- :mod:`~klog.testing.faults.run`: one run end to end (``python -m klog.testing.faults.run --help``;
  ``make chaos-cluster``)

See docs/reliability.md for how to run it and the figures measured.
"""
