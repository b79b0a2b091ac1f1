"""The broker's descriptor budget: every descriptor a connection and a partition can hold, against the process's
open-files limit (RLIMIT_NOFILE), so the broker refuses work it cannot hold instead of failing with EMFILE.

What holds a descriptor:

- a connection: its socket, and the native writer thread's duplicate of it (``dup``, so a number reused after
  the event loop closed the socket never gets our bytes) or, without the writer thread, the duplicate the event
  loop sends files with: **2**. Fetched file ranges waiting in a connection's send queue share the segment
  file's descriptor (no duplicate each);
- a partition: its active segment's ``.log`` (indexes are memory-mapped and keep no descriptor): **1**;
- sealed segments' ``.log`` files: at most ``klog.log.max.open.segment.files`` across all partitions (LRU-closed
  beyond it);
- a burst of accepted connections not yet refused: up to ``socket.listen.backlog.size`` (the event loop accepts
  until the listen queue is empty before a refusal closes them);
- a fixed reserve for everything else: standard streams, listeners, epoll and event descriptors, checkpoint and
  metadata files written now and then, files opened while a topic is created.

Partitions come first (they are state on disk); connections get what is left. ``klog.max.partitions.per.broker``
defaults to what is left after the fixed parts and room for ``CONNECTIONS_FLOOR`` connections (fewer if
``max.connections`` is lower, and at most half of what is left, so a small limit is shared evenly).
"""

from __future__ import annotations

import dataclasses

#: a connection's socket + the writer thread's (or the sendfile path's) duplicate of it
DESCRIPTORS_PER_CONNECTION = 2
#: a partition's active segment file
DESCRIPTORS_PER_PARTITION = 1
#: standard streams, listeners, epoll/eventfds, checkpoint and metadata writes, files opened during a creation
DESCRIPTOR_RESERVE = 64
#: the partition limit when the process has no open-files limit: each partition is a directory, an open file
#: and a few KiB of memory; a single node serving more is a configuration mistake more often than not
UNLIMITED_DEFAULT_MAX_PARTITIONS = 1_000_000
#: connections the default partition limit leaves room for (Kafka clients keep one or two per broker each)
CONNECTIONS_FLOOR = 1000


@dataclasses.dataclass(frozen=True)
class DescriptorBudget:
    #: RLIMIT_NOFILE's soft limit (None: unlimited)
    open_files_limit: int | None
    #: the bound on sealed segments' open files (klog.log.max.open.segment.files, effective)
    segment_files: int
    #: connections the kernel may hand over in one burst before they are refused (socket.listen.backlog.size)
    accept_burst: int

    @property
    def shared(self) -> int | None:
        """Descriptors left for partitions and connections (None: unlimited)."""
        if self.open_files_limit is None:
            return None
        return max(0, self.open_files_limit - DESCRIPTOR_RESERVE - self.accept_burst - self.segment_files)

    def default_max_partitions(self, max_connections: int) -> int:
        """klog.max.partitions.per.broker's default beside ``max_connections`` (max.connections)."""
        shared = self.shared
        if shared is None:
            return UNLIMITED_DEFAULT_MAX_PARTITIONS
        connections = min(max_connections, CONNECTIONS_FLOOR, shared // 2 // DESCRIPTORS_PER_CONNECTION)
        return max(1, (shared - connections * DESCRIPTORS_PER_CONNECTION) // DESCRIPTORS_PER_PARTITION)

    def max_connections(self, partitions: int) -> int | None:
        """Connections that fit beside ``partitions`` partitions (None: unlimited)."""
        shared = self.shared
        if shared is None:
            return None
        return max(0, (shared - partitions * DESCRIPTORS_PER_PARTITION) // DESCRIPTORS_PER_CONNECTION)

    def describe(self) -> str:
        return (f"RLIMIT_NOFILE {self.open_files_limit if self.open_files_limit is not None else 'unlimited'} = "
                f"{DESCRIPTOR_RESERVE} reserved + {self.accept_burst} accept burst + {self.segment_files} sealed "
                f"segment files + {DESCRIPTORS_PER_PARTITION} per partition + {DESCRIPTORS_PER_CONNECTION} per "
                "connection")


def open_files_limit() -> int | None:
    """The process's RLIMIT_NOFILE soft limit (None: unlimited or not on this platform)."""
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)
