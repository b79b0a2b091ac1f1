"""The controller: requests that change cluster metadata become metadata records (Kafka's ``QuorumController``).

Each manager is pure (sans-IO, no asyncio, no clock of its own): ``op(request, image, now) -> ControllerResult``
(the records to commit and the response), decided against the committed :class:`klog.metadata.MetadataImage`.
The records take effect only once the quorum has committed them and the brokers have replayed them into their
image; a manager never changes an image itself.

- :mod:`klog.controller.topics`: CreateTopics, DeleteTopics, CreatePartitions, replica placement;
- :mod:`klog.controller.configs`: AlterConfigs / IncrementalAlterConfigs;
- :mod:`klog.controller.single_voter`: the commit seam (``propose(records) -> committed offset``) for a quorum of
  one; a multi-node quorum (``controller.quorum.voters``) replicates the ``__cluster_metadata`` log with Raft
  (raft-rs in the native core): :mod:`klog.controller.raft` (driver), :mod:`klog.controller.node` (member),
  :mod:`klog.controller.applier` (committed log -> image, snapshots).
"""

from .result import ControllerResult

__all__ = ["ControllerResult"]
