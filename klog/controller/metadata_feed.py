"""What a controller serves to the quorum's observers (``process.roles=broker`` nodes), pure: no sockets, no clocks.

Kafka's brokers that are not controllers are Raft *observers*: they fetch ``__cluster_metadata-0`` from the quorum
leader (a snapshot first when what they need was compacted away) and apply it to their image, but never vote.
klog's raft-rs members talk a klog-private transport, so its observers fetch over the controller listener with a
small klog-private exchange too (:mod:`klog.controller.observer` is the IO):

- hello: :data:`OBSERVER_PREAMBLE`, the observer's node id (int32 BE), its cluster id (int16 BE length + UTF-8,
  length 0 while it has none), as a raft peer's hello but with another preamble, then the 16 bytes of its
  metadata log dir's ``directory.id`` (zeros while it has none: KIP-853's replica key, which DescribeQuorum shows
  and AddRaftVoter checks);
- request frames ``[size int32][after_index int64][max_wait_ms int32][max_bytes int32]``: the committed entries
  after raft index ``after_index``, waiting up to ``max_wait_ms`` for one;
- response frames ``[size int32][kind int8][leader_id int32][term int64][voter count int16]``, each voter's
  ``node id int32, host (int16 length + UTF-8), port int32`` (its controller listener: an observer configured with
  ``controller.quorum.bootstrap.servers`` learns the quorum from it), then, for ``ENTRIES``, ``count int32``
  and per entry ``index int64, term int64, entry kind int8, length int32, data`` (the batch as stored in
  ``__cluster_metadata-0``); for ``SNAPSHOT`` ``index int64, end_offset int64, epoch int32,
  last_contained_log_time_ms int64, length int32, data`` (the serving member's image as record batches, what a
  ``.checkpoint`` holds); for ``REFUSED`` a UTF-8 reason (``length int16``), after which the controller closes.
  ``ENTRIES`` and ``SNAPSHOT`` end with ``committed_index int64``, the last entry the serving member applied (the
  leader's is the quorum's high watermark, which a starting observer catches up to before its broker publishes
  anything); a member of an older klog sends none (and an older observer reads none).

Each member keeps the latest committed entries in a :class:`MetadataFeed` bounded by bytes; an observer further
behind gets a snapshot of the member's image, then the entries after it. Raft indices are the quorum's, so an
observer moves from one member to another (after a failover) without losing its place.
"""

from __future__ import annotations

import collections
import dataclasses
import struct

__all__ = ["ENTRY_KINDS", "OBSERVER_PREAMBLE", "FeedEntry", "FeedRequest", "FeedResponse", "MetadataFeed",
           "decode_request", "decode_response", "encode_request", "encode_response"]

#: First bytes of an observer's connection to a controller listener (as long as the raft preamble, so the
#: listener reads one header and tells raft peers, observers and Kafka clients apart).
OBSERVER_PREAMBLE = b"KLOBSV\x00\x02"   # 2: the hello carries the directory id
ENTRY_KINDS = ("data", "leader_change", "conf_change")
ENTRIES, SNAPSHOT, REFUSED = 0, 1, 2
_REQUEST = struct.Struct(">qii")
_HEAD = struct.Struct(">biq")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qqbi")
_SNAPSHOT = struct.Struct(">qqiqi")
_REASON = struct.Struct(">h")
_VOTER = struct.Struct(">ih")
_PORT = struct.Struct(">i")
_INDEX = struct.Struct(">q")


class FeedProtocolError(ValueError):
    """A malformed observer frame (the message names the field)."""


@dataclasses.dataclass(frozen=True)
class FeedEntry:
    index: int
    term: int
    kind: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class FeedRequest:
    after_index: int
    max_wait_ms: int
    max_bytes: int


@dataclasses.dataclass(frozen=True)
class FeedSnapshot:
    index: int
    end_offset: int
    epoch: int
    last_contained_log_time_ms: int
    data: bytes


@dataclasses.dataclass(frozen=True)
class FeedResponse:
    leader_id: int
    term: int
    #: the quorum's voters: (node id, host, port) of each one's controller listener
    voters: tuple[tuple[int, str, int], ...] = ()
    entries: tuple[FeedEntry, ...] = ()
    snapshot: FeedSnapshot | None = None
    refused: str | None = None
    #: the last entry the serving member applied (None: not sent, a member of an older klog)
    committed_index: int | None = None


def encode_request(req: FeedRequest) -> bytes:
    return _COUNT.pack(_REQUEST.size) + _REQUEST.pack(req.after_index, req.max_wait_ms, req.max_bytes)


def decode_request(frame: bytes) -> FeedRequest:
    if len(frame) != _REQUEST.size:
        raise FeedProtocolError(f"observer request: {len(frame)} bytes, expected {_REQUEST.size}")
    after, wait, max_bytes = _REQUEST.unpack(frame)
    if after < 0 or wait < 0 or max_bytes <= 0:
        raise FeedProtocolError(f"observer request: after_index {after}, max_wait_ms {wait}, max_bytes {max_bytes}")
    return FeedRequest(after, wait, max_bytes)


def encode_response(resp: FeedResponse) -> bytes:
    """The whole frame, size prefix included."""
    kind = REFUSED if resp.refused is not None else SNAPSHOT if resp.snapshot is not None else ENTRIES
    head = [_HEAD.pack(kind, resp.leader_id, resp.term), _REASON.pack(len(resp.voters))]
    for node_id, host, port in resp.voters:
        raw = host.encode()
        head += [_VOTER.pack(node_id, len(raw)), raw, _PORT.pack(port)]
    if resp.refused is not None:
        reason = resp.refused.encode()[:1000]
        body = b"".join(head) + _REASON.pack(len(reason)) + reason
    else:
        if resp.snapshot is not None:
            s = resp.snapshot
            parts = [*head, _SNAPSHOT.pack(s.index, s.end_offset, s.epoch, s.last_contained_log_time_ms, len(s.data)),
                     s.data]
        else:
            parts = [*head, _COUNT.pack(len(resp.entries))]
            for e in resp.entries:
                parts.append(_ENTRY.pack(e.index, e.term, ENTRY_KINDS.index(e.kind), len(e.data)))
                parts.append(e.data)
        if resp.committed_index is not None:
            parts.append(_INDEX.pack(resp.committed_index))
        body = b"".join(parts)
    return _COUNT.pack(len(body)) + body


def decode_response(frame: bytes) -> FeedResponse:
    try:
        kind, leader, term = _HEAD.unpack_from(frame)
        pos = _HEAD.size
        (count,) = _REASON.unpack_from(frame, pos)
        pos += _REASON.size
        voters = []
        for _ in range(count):
            node_id, n = _VOTER.unpack_from(frame, pos)
            pos += _VOTER.size
            host = bytes(frame[pos:pos + n]).decode(errors="replace")
            (port,) = _PORT.unpack_from(frame, pos + n)
            pos += n + _PORT.size
            voters.append((node_id, host, port))
        if kind == REFUSED:
            (n,) = _REASON.unpack_from(frame, pos)
            return FeedResponse(leader, term, tuple(voters),
                                refused=frame[pos + 2:pos + 2 + n].decode(errors="replace"))
        if kind == SNAPSHOT:
            index, end, epoch, log_time, n = _SNAPSHOT.unpack_from(frame, pos)
            pos += _SNAPSHOT.size
            data = frame[pos:pos + n]
            if len(data) != n:
                raise FeedProtocolError(f"observer response: snapshot of {n} bytes cut at {len(data)}")
            return FeedResponse(leader, term, tuple(voters),
                                snapshot=FeedSnapshot(index, end, epoch, log_time, bytes(data)),
                                committed_index=_trailing_index(frame, pos + n))
        if kind != ENTRIES:
            raise FeedProtocolError(f"observer response: unknown kind {kind}")
        (count,) = _COUNT.unpack_from(frame, pos)
        pos += _COUNT.size
        entries = []
        for _ in range(count):
            index, eterm, ekind, n = _ENTRY.unpack_from(frame, pos)
            pos += _ENTRY.size
            if not 0 <= ekind < len(ENTRY_KINDS) or pos + n > len(frame):
                raise FeedProtocolError(f"observer response: entry {index} has kind {ekind} and {n} bytes")
            entries.append(FeedEntry(index, eterm, ENTRY_KINDS[ekind], bytes(frame[pos:pos + n])))
            pos += n
        return FeedResponse(leader, term, tuple(voters), entries=tuple(entries),
                            committed_index=_trailing_index(frame, pos))
    except struct.error as e:
        raise FeedProtocolError(f"observer response: truncated ({e})") from None


def _trailing_index(frame: bytes, pos: int) -> int | None:
    """The ``committed_index`` after a response's body (None: an older member sent none)."""
    if len(frame) == pos:
        return None
    if len(frame) - pos != _INDEX.size:
        raise FeedProtocolError(f"observer response: {len(frame) - pos} bytes after the body, expected "
                                f"{_INDEX.size} (committed_index) or none")
    (index,) = _INDEX.unpack_from(frame, pos)
    return int(index)


class MetadataFeed:
    """The latest committed entries of one member, at most ``max_bytes`` of them (the newest entry is always kept).

    ``after(index)``: the entries after ``index`` (up to ``max_bytes`` of them, at least one); None when the entry
    after ``index`` is no longer (or never was) kept here: the observer needs a snapshot."""

    def __init__(self, max_bytes: int) -> None:
        assert max_bytes > 0
        self.max_bytes = max_bytes
        self._entries: collections.deque[FeedEntry] = collections.deque()
        self._bytes = 0
        #: the index before the first kept entry (entries after it are all kept, in order)
        self.base_index = 0

    @property
    def last_index(self) -> int:
        return self._entries[-1].index if self._entries else self.base_index

    def append(self, entry: FeedEntry) -> None:
        if entry.index != self.last_index + 1:   # the first entry after a start (from a snapshot or not)
            self.reset(entry.index - 1)
        self._entries.append(entry)
        self._bytes += len(entry.data)
        while self._bytes > self.max_bytes and len(self._entries) > 1:
            gone = self._entries.popleft()
            self._bytes -= len(gone.data)
            self.base_index = gone.index

    def compact_through(self, index: int) -> None:
        """The member snapshotted its image at ``index``: an observer behind it loads that image instead (as a
        Kafka observer behind the log start offset fetches the snapshot)."""
        while self._entries and self._entries[0].index <= index:
            gone = self._entries.popleft()
            self._bytes -= len(gone.data)
            self.base_index = gone.index

    def reset(self, index: int) -> None:
        """A snapshot replaced the log through ``index``: entries before it are gone."""
        self._entries.clear()
        self._bytes = 0
        self.base_index = index

    def after(self, index: int, max_bytes: int) -> list[FeedEntry] | None:
        if index < self.base_index:
            return None
        if index >= self.last_index:
            return []
        out: list[FeedEntry] = []
        size = 0
        for e in self._entries:   # the feed is short (bounded by bytes); a scan keeps it simple
            if e.index <= index:
                continue
            if out and size + len(e.data) > max_bytes:
                break
            out.append(e)
            size += len(e.data)
        return out
