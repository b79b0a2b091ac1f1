"""The controller: requests that change cluster metadata become metadata records (Kafka's ``QuorumController``).

Each manager is pure (sans-IO, no asyncio, no clock of its own): ``op(request, image, now) -> ControllerResult``
(the records to commit and the response), decided against the committed :class:`klog.metadata.MetadataImage`.
The records take effect only once the quorum has committed them and the brokers have replayed them into their
image; a manager never changes an image itself.

- :mod:`klog.controller.topics`: CreateTopics, DeleteTopics, CreatePartitions, replica placement;
- :mod:`klog.controller.configs`: AlterConfigs / IncrementalAlterConfigs;
- :mod:`klog.controller.single_voter`: the commit seam (``propose(records) -> committed offset``) for a quorum of
  one, which the Raft driver replaces for a multi-node quorum.
"""

from .result import ControllerResult

__all__ = ["ControllerResult"]
