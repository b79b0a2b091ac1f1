"""Partition replication, Kafka's way (issue 16): pure state machines, no IO and no clock of their own.

- :mod:`.epochs`: the leader epoch cache (Kafka's ``LeaderEpochFileCache``); the native ``PartitionLog`` keeps
  the ``leader-epoch-checkpoint`` file, this answers questions about its entries.
- :mod:`.leader`: a partition's leader side (Kafka's ``Partition`` leader paths): follower fetch state, high
  watermark, acks=all completion, ISR shrink/expand as AlterPartition proposals (KIP-497), fetch validation.
- :mod:`.follower`: a partition's follower side (Kafka's ``AbstractFetcherThread`` per partition): fetch
  offset, truncation on diverging epochs or OffsetsForLeaderEpoch, OFFSET_OUT_OF_RANGE, follower HW.

The replica manager and the fetcher threads (the IO) drive these.
"""
