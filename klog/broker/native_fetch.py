"""The native Fetch path (issue 38): the broker's side of ``klog._native.native_fetch``.

A connection hands a Fetch frame to :func:`serve` before decoding it (``klog/broker/network/connection.py``). One
native call decodes the request, resolves its partitions, reads each below its high watermark and encodes the
answer with the records as segment file regions (sendfile; on TLS read and encrypted a slice at a time by the
writer; bytes with sendfile off), or returns None having changed nothing, and the Python path
(``klog/broker/handlers/fetch.py``) serves the frame unchanged. A long poll
with nothing to return yet comes back with the partitions to wait on: the connection waits on them as the Python
path does (``PartitionManager.wait_for_append``) and calls again when woken or at the deadline.

The native call serves only what the Python path has already judged: the partitions in
``PartitionManager.fetch_routes``, each learned when the Python path served a consumer's or a replica's fetch of it
as its leader without an error (``klog/broker/handlers/fetch.py::_read_all``), forgotten with the Produce path's
routes at every change of leadership, topics, partitions, configs or log dirs
(``PartitionManager.forget_native_routes``). A consumer's last stable offset and a read_committed consumer's aborted
transactions come from the log, where the broker's transaction state sets them (``first_unstable_offset``,
``aborted_transactions``).
Everything else is left to Python: a replica's fetch whose verdict is not a plain read (:func:`judge_replica`) or
that comes under an authorizer, a fetch session's opening or closing fetch (KIP-227: ``session_epoch`` 0,
or -1 naming a session), an incremental fetch of a session not handed over or one that adds or forgets
partitions, a consumer
naming its rack to a broker with ``replica.selector.class``, unknown or unrouted partitions, a fenced or unknown
leader epoch, offsets out of range, read errors, malformed frames, and connections under a client quota, an
unfinished SASL login, or request tracing.

Fetch sessions: the Python path's session cache (``klog/broker/fetch_sessions.py``) hands a consumer's session to
the native table once every partition of it is routed; the native call then serves the session's incremental
fetches that only update partitions already in it (its epoch and partitions move on in the table, and it answers
only the partitions with news), and :func:`account` records the session's use in the cache. The Python path takes
the session back before it serves any other fetch of it.

Replicas' fetches (Kafka's followers): the native call judges one with a single call of :func:`judge_replica` before
its reads (the follower's position recorded, the high watermark moved, acks=all produces completed, an ISR expansion
proposed: the Python replica manager's work, as on the Python path), then reads to the log end, not the high
watermark, and parks a caught-up one in the wait table keyed on appends; it is not judged again when served after
its wait (``judged``), as the Python path judges a fetch once.

Long polls: a request with nothing to answer yet is parked in the routes' native wait table when the connection
sends through the native writer thread (``klog.fetch.native.wait.max.parked`` bounds the table; beyond it, and on
TLS connections, the connection waits in Python as above). The table answers it without the event loop: a high
watermark that moves up on one of its partitions (an append, a follower's fetch for acks=all) has its wait thread
serve the frame again and queue the answer on the connection; at ``max_wait_ms`` it answers with what there is (an
empty response). The connection does nothing meanwhile: it takes the request back (:meth:`FetchRoutes.take_back`)
before it serves its next one (answered: go on; still parked: wait in Python for the rest of ``max_wait_ms``, as
before), and :func:`drain_answered` counts what the table answered. A replica's long poll waits for an append to
one of its partitions rather than a high watermark. A parked request the native path can no longer
serve (a route forgotten, a session taken back, a read error) comes back through :class:`ParkedFetches` and its
connection serves it in Python.

Authorization: with an authorizer the native call asks the same hook as the handlers
(``klog/broker/access.py::AccessControl``) once per topic of the request, through the connection's ``allow``
callable, without counting a denial (the Python path then answers TOPIC_AUTHORIZATION_FAILED and counts it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from klog import _native

if TYPE_CHECKING:
    from klog.broker.context import BrokerState

FETCH_KEY = 1


def serve(state: BrokerState, frame: Any, allow: Callable[[str], bool] | None, *, zero_copy: bool,
          may_wait: bool = True, park: Any = None, judged: bool = False) -> Any:
    """The native path's outcome for ``frame`` (a ``klog._native.NativeFetchOutcome``: its ``chunks`` to send, or
    None and its ``wait_keys`` to wait on, for an append when ``replica``), or None: the Python path serves it.
    ``may_wait``: False once the request's ``max_wait_ms`` has passed (answer with what there is). ``park``: the
    connection's native send queue, to park a long poll in the native wait table (the outcome's ``parked`` id; 0: not
    parked, wait on its ``wait_keys``). ``judged``: a replica's fetch served again after its wait, judged when it
    arrived (:func:`judge_replica`). With an authorizer replicas' fetches are the Python path's (ClusterAction)."""
    routes = state.partitions.fetch_routes
    advertised = state.api_versions.get(FETCH_KEY)
    if routes is None or advertised is None:
        return None
    judge = None if state.access is not None else _judge_of(state)
    return _native.native_fetch(frame, routes, max_version=advertised[1],
                                 fetch_max_bytes=state.config["fetch.max.bytes"], zero_copy=zero_copy,
                                 may_wait=may_wait, allow=allow, park=park, judge=judge, judged=judged)


def _judge_of(state: BrokerState) -> Callable[[int, int, list[tuple[str, int, int, int, int, int]]], bool]:
    """The broker's :func:`judge_replica` hook (made once)."""
    partitions = state.partitions
    made: Callable[[int, int, list[tuple[str, int, int, int, int, int]]], bool] | None = partitions.replica_judge
    if made is None:
        def judge(replica_id: int, broker_epoch: int, wanted: list[tuple[str, int, int, int, int, int]]) -> bool:
            return judge_replica(state, replica_id, broker_epoch, wanted)
        made = partitions.replica_judge = judge
    return made


def judge_replica(state: BrokerState, replica_id: int, broker_epoch: int,
                  wanted: list[tuple[str, int, int, int, int, int]]) -> bool:
    """A replica's fetch on the native path, judged as the Python path's ``_read_all`` judges it
    (``ReplicaManager.follower_fetch`` per partition: leader epoch, last fetched epoch against the epoch cache, the
    follower's fetch position recorded, which may move the high watermark, complete acks=all produces, wake the
    consumers' long polls and propose an ISR expansion to the controller). ``wanted``: (topic, partition, current
    leader epoch, fetch offset, last fetched epoch, log start offset) per partition read. True: every partition is
    read to its log end; False: one is throttled (``leader.replication.throttled.replicas``) or its verdict is an
    error or a diverging epoch, and the Python path serves the request (judging it again to the same verdicts: a
    verdict that reads records the same position again, which changes nothing)."""
    throttle = state.leader_throttle
    if any(throttle.is_throttled(name, index) for name, index, *_ in wanted):
        return False
    replicas = state.replicas
    for name, index, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset in wanted:
        verdict = replicas.follower_fetch(name, index, replica_id, broker_epoch, current_leader_epoch, fetch_offset,
                                          last_fetched_epoch, log_start_offset)
        if verdict.error or not verdict.read:
            return False
    return True


def account(state: BrokerState, outcome: Any) -> None:
    """Count what the native call answered as the Python path counts a Fetch response
    (``BrokerMetrics.fetched``: bytes out and fetch requests per topic entry), and a session's use."""
    if outcome.session_id:   # its last use, for the session cache's eviction (the Python path's clock)
        state.fetch_sessions.touch(outcome.session_id, int(time.monotonic() * 1000))
    metrics = state.metrics
    if metrics is not None:
        metrics.fetched_natively(outcome.topic_bytes)


class ParkedFetches:
    """The connections whose long polls are parked in the native wait table, by park id, and the event loop's
    ear for the ones the table sends back to the Python path (``FetchRoutes.take_returned``)."""

    def __init__(self, routes: Any, loop: Any) -> None:
        self.routes = routes
        self.loop = loop
        #: park id -> the connection (anything with ``resume_parked(park_id)``)
        self.connections: dict[int, Any] = {}
        self.fd: int = routes.wait_notify_fd
        if self.fd >= 0:
            loop.add_reader(self.fd, self._returned)

    def _returned(self) -> None:
        for parked_id in self.routes.take_returned():
            connection = self.connections.get(parked_id)
            if connection is not None:
                connection.resume_parked(parked_id)
            else:   # its connection is gone: forget it
                self.routes.take_back(parked_id)

    def stop(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            self.fd = -1


def parked_fetches(state: BrokerState, loop: Any) -> ParkedFetches | None:
    """The broker's :class:`ParkedFetches` (made at its first use), or None: the native Fetch path is off."""
    partitions = state.partitions
    routes = partitions.fetch_routes
    if routes is None:
        return None
    parked: ParkedFetches | None = partitions.parked_fetches
    if parked is None:
        parked = ParkedFetches(routes, loop)
        partitions.parked_fetches = parked
    return parked


def drain_answered(state: BrokerState, broker: Any, metrics: Any) -> None:
    """Count what the native wait table answered since the last call as :func:`account` counts an answer: the
    topics' bytes and fetch requests, the request's time (``metrics.request_time_ms``), a session's use; summed
    by the table (one call however many answers, no Python object per answer)."""
    routes = state.partitions.fetch_routes
    if routes is None:
        return
    bounds = () if metrics is None else metrics.request_time_bounds
    answered, sessions, topics, buckets, total_ms = routes.take_answered_summary(bounds)
    if not answered:
        return
    if sessions:
        now_ms = int(time.monotonic() * 1000)
        for session_id, uses in sessions:
            state.fetch_sessions.touch(session_id, now_ms)
            broker.native_fetch_session_requests += uses
    if metrics is not None:
        metrics.fetched_natively_totals(topics)
        metrics.requests_counted(FETCH_KEY, buckets, total_ms)
