"""Metadata answers kept encoded (issue 38: Metadata's cost per request).

A Metadata answer (klog/broker/handlers/metadata.py) is a function of the request's version and body (the topics
named or all, allow_auto_topic_creation, the authorized-operations flags), the listener the client connected on
(every broker's address on it), this broker's static settings (cluster id, node id, rack, endpoints,
``auto.create.topics.enable``) and the metadata image: topics, partitions, leaders, ISR, live and fenced brokers,
their offline log dirs. Without an authorizer nothing depends on the principal, the client's address or its
client id. So the connection answers a Metadata request it has answered before, on the same listener and the same
image, with the frame encoded then, its correlation id replaced, without decoding the request or running the
handler (:class:`MetadataAnswers`).

Never kept: answers under an authorizer (they depend on the principal's ACLs, and every check is counted: there
is no cache at all then), under client quotas (the answer carries a throttle time; the connection does not take
this path then), answers that auto-create topics (the handler returns a coroutine), and answers naming a random
controller (this broker not an unfenced registered one on a quorum:
:attr:`klog.broker.cluster_metadata.ClusterMetadata.controller_id`).

When they are dropped: every image the broker applies is a new object; the first lookup or answer that sees one
whose topics or brokers mapping is not the one the answers came from drops them all (a topic created or deleted,
partitions added, a leader, ISR, replica set or log dir assignment changed, a broker registered, fenced, unfenced,
its endpoints or offline log dirs changed: :class:`klog.metadata.delta.MetadataDelta` builds new mappings then).
An image that changed neither (a quorum's periodic NoOpRecord, a config, quota or ACL change, which no Metadata
answer without an authorizer depends on) keeps them: the delta shares those mappings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from klog.broker.cluster_metadata import ClusterMetadata
    from klog.metadata.image import MetadataImage

__all__ = ["MAX_ANSWERS", "MAX_BYTES", "MetadataAnswers", "request_key"]

#: answers kept for one image at most (distinct requests: versions x topic lists x listeners); beyond, all go
MAX_ANSWERS = 256
#: bytes of answers kept at most (a whole-cluster answer of a large cluster is big); beyond, all go
MAX_BYTES = 16 << 20


def request_key(frame: Any) -> bytes | None:
    """What a Metadata request frame's answer depends on among its bytes: its version and everything after the
    client id (the header's tagged fields and the body). None when the header is cut short or the client id is not
    UTF-8 (the Python path closes the connection over them)."""
    if len(frame) < 10:
        return None
    if type(frame) is not bytes:   # a large frame, in a pooled buffer
        frame = bytes(frame)
    n = frame[8] << 8 | frame[9]
    if n >= 0x8000:   # a negative length: a null client id
        return frame[2:4] + frame[10:]
    end = 10 + n
    if end > len(frame):
        return None
    client_id = frame[10:end]
    if not client_id.isascii():
        try:
            client_id.decode()
        except UnicodeDecodeError:
            return None
    return frame[2:4] + frame[end:]


class MetadataAnswers:
    """Encoded Metadata answers of the current image, by (listener, :func:`request_key`)."""

    __slots__ = ("_metadata", "_image", "_topics", "_brokers", "_answers", "_bytes", "hits", "stored")

    def __init__(self, metadata: ClusterMetadata) -> None:
        self._metadata = metadata
        #: the image the kept answers were computed from, or a later one with the same topics and brokers
        self._image: MetadataImage | None = None
        #: that image's topics (by name: those by id change with them) and brokers
        self._topics: Any = None
        self._brokers: Any = None
        #: (listener, request key) -> (size prefix, the response after its correlation id)
        self._answers: dict[tuple[str, bytes], tuple[bytes, bytes]] = {}
        self._bytes = 0
        #: requests answered from here, answers kept (counters for tests and operators)
        self.hits = 0
        self.stored = 0

    def _current(self, image: MetadataImage) -> bool:
        """Whether the answers kept hold for ``image``: it is the image they came from, or a later one whose topics
        and brokers are the same objects (a NoOpRecord, a config or ACL change: klog.metadata.delta shares the
        mappings nothing changed in). Drops them when not."""
        if image is self._image:
            return True
        if image.topics_by_name is self._topics and image.brokers is self._brokers:
            self._image = image
            return True
        self._image = image
        self._topics = image.topics_by_name
        self._brokers = image.brokers
        self._answers.clear()
        self._bytes = 0
        return False

    def answer(self, listener: str, frame: Any) -> bytes | None:
        """The whole response frame (size prefix first) to the Metadata request ``frame`` received on
        ``listener``, if it was answered before on the current image; else None (the handler answers it)."""
        image = self._metadata.image
        if image is not self._image and not self._current(image):
            return None
        key = request_key(frame)
        if key is None:
            return None
        found = self._answers.get((listener, key))
        if found is None:
            return None
        self.hits += 1
        prefix, rest = found
        return prefix + frame[4:8] + rest

    def store(self, listener: str, frame: Any, image: MetadataImage, chunks: list[Any]) -> None:
        """Keep the encoded answer ``chunks`` (``encode_response``'s: size prefix, then header and body) to
        ``frame``, computed by the handler from ``image``, if it may be given again."""
        metadata = self._metadata
        if image is not metadata.image or len(chunks) != 2:
            return
        if metadata.controller is not None:   # on a quorum the controller named is this broker only when unfenced
            me = image.brokers.get(metadata.node_id)
            if me is None or me.fenced:
                return
        key = request_key(frame)
        if key is None:
            return
        self._current(image)
        prefix, whole = chunks
        rest = bytes(whole[4:])
        size = len(rest) + len(key)
        if len(self._answers) >= MAX_ANSWERS or self._bytes + size > MAX_BYTES:
            self._answers.clear()
            self._bytes = 0
            if size > MAX_BYTES:
                return
        self._answers[(listener, key)] = (bytes(prefix), rest)
        self._bytes += size
        self.stored += 1
