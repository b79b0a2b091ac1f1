"""A simulated partition log for the replication state machines' tests: one record per offset, each with the
leader epoch it was written in, and the epoch cache kept as the storage keeps it."""

from __future__ import annotations

from klog.broker.replication.epochs import LeaderEpochCache


class SimLog:
    def __init__(self) -> None:
        self.start = 0
        self.records: list[tuple[int, int]] = []  # (offset, epoch), offsets contiguous from self.start
        self.epochs = LeaderEpochCache()
        self.high_watermark = 0

    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return self.start + len(self.records)

    def append_as_leader(self, count: int, epoch: int) -> int:
        """Append ``count`` records in ``epoch``; the last offset."""
        assert count > 0
        for _ in range(count):
            self.epochs.assign(epoch, self.log_end_offset)
            self.records.append((self.log_end_offset, epoch))
        return self.log_end_offset - 1

    def append_as_follower(self, records: list[tuple[int, int]]) -> None:
        for offset, epoch in records:
            assert offset == self.log_end_offset, (offset, self.log_end_offset)
            self.epochs.assign(epoch, offset)
            self.records.append((offset, epoch))

    def read(self, offset: int, max_records: int) -> list[tuple[int, int]]:
        i = offset - self.start
        return self.records[i:i + max_records]

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset:
            del self.records[max(0, offset - self.start):]
            self.high_watermark = min(self.high_watermark, offset)
        # Always, as Kafka's UnifiedLog.truncateTo: a leader that appended nothing in its epoch left an entry at
        # the log end that conflicts with the new leader's history.
        self.epochs.truncate_from_end(min(offset, self.log_end_offset))

    def truncate_fully(self, start: int) -> None:
        self.records.clear()
        self.start = start
        self.epochs.clear()
        self.high_watermark = start

    def delete_before(self, offset: int) -> None:
        assert self.start <= offset <= self.log_end_offset
        del self.records[:offset - self.start]
        self.start = offset
        self.epochs.truncate_from_start(offset)
