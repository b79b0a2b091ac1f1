"""Partition replication, Kafka's way (issue 16): pure state machines, no IO and no clock of their own.

- :mod:`.epochs`: the leader epoch cache (Kafka's ``LeaderEpochFileCache``); the native ``PartitionLog`` keeps
  the ``leader-epoch-checkpoint`` file, this answers questions about its entries.
- :mod:`.leader`: a partition's leader side (Kafka's ``Partition`` leader paths): follower fetch state, high
  watermark, acks=all completion, ISR shrink/expand as AlterPartition proposals (KIP-497), fetch validation.
- :mod:`.follower`: a partition's follower side (Kafka's ``AbstractFetcherThread`` per partition): fetch
  offset, truncation on diverging epochs or OffsetsForLeaderEpoch, OFFSET_OUT_OF_RANGE, follower HW.
- :mod:`.selector`: fetch from the closest replica (KIP-392, Kafka's ``RackAwareReplicaSelector``): the in-sync
  follower of a consumer's rack the leader names as ``preferred_read_replica``.

The replica manager and the fetcher threads (the IO) drive these; what they still have to do (issue 16):
serve follower Fetch (replica_id / ReplicaState) through :meth:`.leader.LeaderPartition.follower_fetch` and
OffsetsForLeaderEpoch through ``offset_for_leader_epoch``; hold acks=all produces in the partition's queue and
answer them from the completions; send the proposals as AlterPartition to the active controller (serving
:func:`klog.controller.partitions_isr.alter_partition` on the controller listener) and feed back the answers; run
one fetcher per source broker applying :mod:`.follower`'s actions to the native log (``append_as_follower``,
``truncate_to``, a full truncation) and mirroring ``assign_epoch_start`` when a broker becomes leader.
``tests/test_replication_simulation.py`` runs all of it on simulated logs and a simulated clock.
"""
