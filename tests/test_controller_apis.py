"""The controller's Kafka APIs (klog.controller.apis) over an in-memory quorum writer: requests in, records committed
and responses out, and the refusals of a node that is not the active controller or cannot commit.

No sockets, no files: the writer replays committed records into its image as a quorum would.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Sequence
from types import SimpleNamespace as NS
from typing import Any

import pytest

from klog.controller.apis import CONTROLLER_API_VERSIONS, ControllerApis, not_controller_error
from klog.controller.topics import TopicError
from klog.metadata.config import BrokerConfig
from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol import versions
from klog.protocol.errors import ErrorCode

ZERO = uuid.UUID(int=0)
STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


def registered_brokers(*broker_ids: int) -> MetadataImage:
    records = [record("FeatureLevelRecord", name="metadata.version", feature_level=25)]
    records += [record("RegisterBrokerRecord", broker_id=b, incarnation_id=uuid.uuid4(), broker_epoch=b,
                       end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092 + b,
                                    "security_protocol": 0}], features=[], rack=None, fenced=False)
                for b in broker_ids]
    return replay(EMPTY_IMAGE, records, 0)[0]


class MemoryQuorum:
    """A QuorumWriter that commits by replaying into its image; ``refuse_commit`` makes it refuse, ``leader``
    False makes this node a follower."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.leader = True
        self.refuse_commit: TopicError | None = None
        self.commits: list[list[MetadataRecord]] = []

    def not_controller(self) -> TopicError | None:
        return None if self.leader else not_controller_error(1, 2)

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        if self.refuse_commit is not None:
            raise self.refuse_commit
        await asyncio.sleep(0)   # as a quorum's commit, it waits: other decisions may be asked for meanwhile
        self.commits.append(list(records))
        self.apply(records)

    def apply(self, records: Sequence[MetadataRecord]) -> None:
        self.image = replay(self.image, list(records), self.image.highest_offset + 1)[0]


def create_request(*names: str, partitions: int = 1, validate_only: bool = False,
                   configs: dict[str, str] | None = None) -> NS:
    return NS(topics=[NS(name=n, num_partitions=partitions, replication_factor=1, assignments=[],
                         configs=[NS(name=k, value=v) for k, v in (configs or {}).items()]) for n in names],
              timeout_ms=30000, validate_only=validate_only)


def controller(quorum: MemoryQuorum, **props: str) -> ControllerApis:
    return ControllerApis(quorum, BrokerConfig(props))


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_create_topics_commits_the_topic_and_answers_its_configs_from_v5():
    quorum = MemoryQuorum(registered_brokers(1))
    apis = controller(quorum)
    answer = run(apis.create_topics(create_request("orders", partitions=3, configs={"retention.ms": "1000"}), 7, "c"))
    (topic,) = answer["topics"]
    assert topic["error_code"] == 0 and topic["num_partitions"] == 3
    assert quorum.image.topic("orders") is not None and len(quorum.image.topic("orders").partitions) == 3
    assert {"name": "retention.ms", "value": "1000", "read_only": False, "config_source": 1,
            "is_sensitive": False} in topic["configs"]
    before_v5 = run(apis.create_topics(create_request("payments"), 4, "c"))
    assert before_v5["topics"][0]["error_code"] == 0 and before_v5["topics"][0]["configs"] is None


def test_a_node_that_is_not_the_active_controller_answers_not_controller_on_every_item_and_commits_nothing():
    quorum = MemoryQuorum(registered_brokers(1))
    quorum.leader = False
    apis = controller(quorum)
    answer = run(apis.create_topics(create_request("orders", "bad name!", validate_only=True), 7, "c"))
    assert [t["error_code"] for t in answer["topics"]] == [int(ErrorCode.NOT_CONTROLLER)] * 2
    assert all("not the active controller" in t["error_message"] for t in answer["topics"])
    listed = run(apis.list_partition_reassignments(NS(topics=None)))
    assert listed["error_code"] == int(ErrorCode.NOT_CONTROLLER)
    assert quorum.commits == [] and quorum.image.topic("orders") is None


def test_a_refused_commit_answers_its_error_on_the_items_that_would_have_succeeded():
    quorum = MemoryQuorum(registered_brokers(1))
    quorum.refuse_commit = TopicError(STORAGE_ERROR, "the metadata log dir is offline")
    answer = run(controller(quorum).create_topics(create_request("orders", "bad name!"), 7, "c"))
    good, bad = answer["topics"]
    assert (good["error_code"], good["error_message"]) == (STORAGE_ERROR, "the metadata log dir is offline")
    assert (good["topic_id"], good["num_partitions"], good["replication_factor"]) == (ZERO, -1, -1)
    assert bad["error_code"] == int(ErrorCode.INVALID_TOPIC_EXCEPTION)
    assert quorum.commits == []


def test_a_commit_that_fails_answers_its_error_and_the_image_stays():
    quorum = MemoryQuorum(registered_brokers(1))
    quorum.refuse_commit = TopicError(int(ErrorCode.NOT_CONTROLLER), "leadership moved")
    answer = run(controller(quorum).delete_topics(NS(topic_names=["missing"], timeout_ms=30_000), 5))
    assert answer["responses"][0]["error_code"] == int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)   # nothing to commit
    quorum.refuse_commit = None
    apis = controller(quorum)
    run(apis.create_topics(create_request("orders"), 7, "c"))
    quorum.refuse_commit = TopicError(int(ErrorCode.NOT_CONTROLLER), "leadership moved")
    answer = run(apis.delete_topics(NS(topic_names=["orders"], timeout_ms=30_000), 5))
    assert answer["responses"][0]["error_code"] == int(ErrorCode.NOT_CONTROLLER)
    assert quorum.image.topic("orders") is not None


def test_decisions_are_serialized_so_each_is_made_on_the_image_with_the_one_before():
    quorum = MemoryQuorum(registered_brokers(1))
    apis = controller(quorum)

    async def both() -> list[dict[str, Any]]:
        return list(await asyncio.gather(apis.create_topics(create_request("orders"), 7, "a"),
                                         apis.create_topics(create_request("orders"), 7, "b")))

    first, second = run(both())
    assert first["topics"][0]["error_code"] == 0
    assert second["topics"][0]["error_code"] == int(ErrorCode.TOPIC_ALREADY_EXISTS)
    assert len(quorum.commits) == 1


def test_the_brokers_own_writes_take_the_same_path_and_raise_what_refuses_them():
    quorum = MemoryQuorum(registered_brokers(1))
    apis = controller(quorum)
    assert run(apis.allocate_producer_ids(1, 1)) == (0, 1000)
    assert run(apis.allocate_producer_ids(1, 1)) == (1000, 1000)
    assert run(apis.create_internal_topic("__consumer_offsets", 3, 3, {"cleanup.policy": "compact"})) == 0
    topic = quorum.image.topic("__consumer_offsets")
    assert topic is not None and len(topic.partitions) == 3 and quorum.image.topic_config(topic.name) == {
        "cleanup.policy": "compact"}
    assert run(apis.create_internal_topic("__consumer_offsets", 3, 3, {})) == 0 and len(quorum.commits) == 3
    quorum.leader = False
    with pytest.raises(TopicError) as refused:
        run(apis.allocate_producer_ids(1, 1))
    assert refused.value.code == int(ErrorCode.NOT_CONTROLLER) and len(quorum.commits) == 3


def test_handle_dispatches_a_forwarded_request_by_its_api_key():
    quorum = MemoryQuorum(registered_brokers(1))
    apis = controller(quorum)
    header = NS(api_key=19, api_version=7, client_id="forwarding-broker")
    answer = run(apis.handle(header, create_request("orders")))
    assert answer["topics"][0]["error_code"] == 0 and quorum.image.topic("orders") is not None
    elect = run(apis.handle(NS(api_key=43, api_version=2, client_id=None),
                            NS(election_type=0, topic_partitions=[], timeout_ms=1000)))
    assert elect == {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": []}


def test_the_controller_decides_only_versions_the_codec_speaks():
    for api_key, (lo, hi) in CONTROLLER_API_VERSIONS.items():
        codec_lo, codec_hi = versions(api_key)
        assert codec_lo <= lo <= hi <= codec_hi, api_key


def test_a_controller_only_node_loads_no_broker_code():
    """What ``process.roles=controller`` imports: the entry point, the Raft member, its listener and decisions."""
    code = ("import sys, klog.broker.__main__, klog.controller.apis, klog.controller.node, "
            "klog.controller.broker_service, klog.controller.describe_quorum, klog.controller.voter_changes; "
            "print(sorted(m for m in sys.modules if m.startswith('klog.broker')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['klog.broker', 'klog.broker.__main__']"


class StuckQuorum(MemoryQuorum):
    """A quorum whose commits never complete (no majority)."""

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        await asyncio.Event().wait()


def test_writers_sharing_a_nodes_lock_decide_each_on_the_image_with_the_one_before():
    """A quorum member's ControllerApis and its brokers' lifecycle write through one MetadataWriter lock: producer-id
    blocks asked for at once from both never overlap (each is decided on the image with the other's record)."""
    from klog.controller.apis import MetadataWriter
    from klog.controller.producer_ids import answer_allocate_producer_ids

    quorum = MemoryQuorum(registered_brokers(1))

    async def both() -> tuple[Any, Any]:
        decisions = asyncio.Lock()
        apis = ControllerApis(quorum, BrokerConfig({}), decisions=decisions)
        lifecycle = MetadataWriter(quorum, decisions)
        request = NS(broker_id=1, broker_epoch=1)
        return await asyncio.gather(apis.allocate_producer_ids(1, 1),
                                    lifecycle.write(lambda image: answer_allocate_producer_ids(request, image)))

    own, forwarded = run(both())
    assert own == (0, 1000)
    assert (forwarded["error_code"], forwarded["producer_id_start"]) == (0, 1000)
    assert quorum.image.next_producer_id == 2000 and len(quorum.commits) == 2


def test_the_write_path_bounds_a_commit_and_tells_what_was_not_committed():
    """Past ``timeout_s`` the decision is answered REQUEST_TIMED_OUT, once its records' fate is known or this node no
    longer decides (here: it steps down, as raft-rs's check_quorum makes a leader without a majority do); a node
    that is not active decides (for a per-item answer) and commits nothing, and says so."""
    from klog.controller.apis import MetadataWriter
    from klog.controller.producer_ids import allocate_producer_ids

    quorum = StuckQuorum(registered_brokers(1))
    uncommitted: list[str] = []

    async def decide() -> Any:
        return await MetadataWriter(quorum).decide(lambda image: allocate_producer_ids(1, 1, image), timeout_s=0.05,
                                                   on_uncommitted=uncommitted.append)

    async def step_down_later() -> Any:
        async def step_down() -> None:
            await asyncio.sleep(0.3)
            quorum.leader = False

        stepping = asyncio.ensure_future(step_down())
        decision = await decide()
        assert stepping.done()   # answered only once the node stopped deciding, not at its 0.05 s timeout
        return decision

    decision = run(step_down_later())
    assert decision.refusal is not None and decision.refusal.code == int(ErrorCode.REQUEST_TIMED_OUT)
    assert not decision.not_active and len(uncommitted) == 1 and quorum.image.next_producer_id == -1
    # not active: decided (for a per-item answer), refused; its records were not committed, which it tells
    decision = run(decide())
    assert decision.refusal is not None and decision.refusal.code == int(ErrorCode.NOT_CONTROLLER)
    assert decision.not_active and decision.response == (0, 1000) and len(uncommitted) == 2


class HeldQuorum(MemoryQuorum):
    """A quorum whose commits complete once ``release`` is set (a slow majority)."""

    def __init__(self, image: MetadataImage) -> None:
        super().__init__(image)
        self.release = asyncio.Event()

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        await self.release.wait()
        self.commits.append(list(records))
        self.apply(records)


@pytest.mark.parametrize("gives_up", ["cancelled", "timed out"])
def test_a_decision_whose_caller_stops_waiting_holds_the_next_one_until_its_records_are_committed(gives_up):
    """A caller that stops waiting for a decision (its client disconnected and its task was cancelled, or its
    timeout passed) leaves the records proposed: the next decision must be made on the image with them. Released
    early, two producer-id allocations got the same block (and two deletions of one topic wrote two
    RemoveTopicRecords, which no member can replay)."""
    from klog.controller.apis import MetadataWriter
    from klog.controller.producer_ids import allocate_producer_ids

    quorum = HeldQuorum(registered_brokers(1, 2))
    writer = MetadataWriter(quorum)

    async def both() -> tuple[Any, Any]:
        first = asyncio.ensure_future(writer.decide(lambda image: allocate_producer_ids(1, 1, image),
                                                    timeout_s=0.05 if gives_up == "timed out" else None))
        await asyncio.sleep(0.1)
        if gives_up == "cancelled":
            first.cancel()
        second = asyncio.ensure_future(writer.decide(lambda image: allocate_producer_ids(2, 2, image)))
        await asyncio.sleep(0.2)
        assert not second.done()   # waits for the first decision's records
        quorum.release.set()
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
        return outcomes[0], outcomes[1]

    first, second = run(both())
    if gives_up == "cancelled":
        assert isinstance(first, asyncio.CancelledError)
    else:
        assert first.refusal is None and first.response == (0, 1000)   # committed after all: answered so
    assert second.refusal is None and second.response == (1000, 1000)
    assert [len(c) for c in quorum.commits] == [1, 1] and quorum.image.next_producer_id == 2000


def test_a_quorum_members_broker_lifecycle_writes_under_the_members_one_lock(tmp_path):
    """Its ControllerApis is given the same lock when the node starts (klog.broker.__main__.serve, BrokerState)."""
    from klog.broker.__main__ import assemble, load_config
    from klog.testing.kafka import free_port

    port = free_port()
    config = load_config(None, [
        "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{port}", f"log.dirs={tmp_path}"])

    async def parts() -> Any:
        return assemble(config)

    built = run(parts())
    lock = built.controller.decisions
    assert built.brokers.writer.decisions is lock


def test_a_quorum_members_raft_driver_and_controller_listener_share_one_port_made_before_both(tmp_path):
    """The Raft driver hands the controller port's Kafka connections to the controller listener and its observer
    connections to the member's feed through one ListenerPort given to each constructor (klog.broker.__main__
    assemble), never a handler assigned into the driver afterwards; each kind of connection has one server."""
    import pytest

    from klog.broker.__main__ import assemble, load_config
    from klog.controller.describe_quorum import ControllerListener
    from klog.testing.kafka import free_port

    port = free_port()
    config = load_config(None, [
        "process.roles=controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER", f"listeners=CONTROLLER://127.0.0.1:{port}", f"log.dirs={tmp_path}"])

    async def parts() -> Any:
        return assemble(config)

    built = run(parts())
    shared = built.controller.driver.port
    assert shared.kafka == built.listener.serve and shared.observers is not None
    assert not hasattr(built.controller.driver, "kafka_connections")
    # a controller-only node's ControllerApis is made here too, writing under the member's one lock
    assert built.controller_apis.writer.decisions is built.controller.decisions
    with pytest.raises(AssertionError, match="one server"):
        ControllerListener(built.controller.driver, "CONTROLLER", lambda: None, port=shared)
