"""Every metadata write of a quorum member has one owner: klog.controller.writer.RaftAppends is the only code that
appends to the Raft log, a decision's records reach it only through MetadataWriter.decide under the member's
``decisions`` lock, and the member's own writes (no-op records, RegisterControllerRecord) wait for that lock too;
the new leader's bootstrap records and its abort of a metadata transaction left open are the documented bypass."""

from __future__ import annotations

import ast
import asyncio
import functools
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from klog.controller.node import ControllerNode

ROOT = Path(__file__).resolve().parent.parent
KLOG = ROOT / "klog"

#: every call of a method named ``propose`` in klog/, and why it may be there
ALLOWED_PROPOSE_CALLS = {
    # RaftAppends: a decision's records (commit) and the unawaited no-op and bootstrap proposals (_unawaited)
    ("klog/controller/writer.py", "RaftAppends.commit"),
    ("klog/controller/writer.py", "RaftAppends._unawaited"),
    # the Raft driver itself handing a batch to the native Raft node
    ("klog/controller/raft.py", "RaftDriver.propose.submit"),
    # a single voter's durable metadata log (no Raft): ClusterMetadata._commit (its callers: below)
    ("klog/broker/cluster_metadata.py", "ClusterMetadata._commit"),
    # the Raft test harness program (klog.testing): proposes batches to exercise Raft alone, no metadata writer
    ("klog/testing/quorum_member.py", "serve"),
}


@functools.cache
def _method_calls() -> list[tuple[str, str, str, str]]:
    """(method, file, enclosing function path, receiver) of every ``receiver.method(...)`` call in klog/."""
    found: list[tuple[str, str, str, str]] = []
    for path in sorted(KLOG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()

        def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
            for child in ast.iter_child_nodes(node):
                inner = scope
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = (*scope, child.name)
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                    found.append((child.func.attr, rel, ".".join(scope), ast.unparse(child.func.value)))
                visit(child, inner)

        visit(ast.parse(path.read_text(), str(path)), ())
    return found


def _calls_of(method: str) -> set[tuple[str, str, str]]:
    """(file, enclosing function path, receiver) of every ``receiver.<method>(...)`` call in klog/."""
    return {(file, scope, receiver) for name, file, scope, receiver in _method_calls() if name == method}


def _callers(method: str) -> set[tuple[str, str]]:
    return {(file, scope) for file, scope, _ in _calls_of(method)}


def test_only_the_writer_appends_to_the_raft_log() -> None:
    calls = _callers("propose")
    assert calls - ALLOWED_PROPOSE_CALLS == set(), "a new caller appends to a metadata log outside the write path"
    assert ALLOWED_PROPOSE_CALLS - calls == set(), "the allowed list names a call that is gone: shorten it"


def test_a_decisions_records_reach_raft_only_through_the_raft_quorum_writer() -> None:
    # RaftAppends.commit has one caller, RaftQuorumWriter.commit, which MetadataWriter.decide calls under the lock
    assert {(f, s) for f, s, receiver in _calls_of("commit") if receiver.endswith("appends")} == {
        ("klog/controller/writer.py", "RaftQuorumWriter.commit")}
    # the bypass has one caller: a new quorum's leader applying its own LeaderChange
    assert _callers("propose_bootstrap") == {("klog/controller/node.py", "ControllerNode._on_committed")}
    assert _callers("propose_noop") == {("klog/controller/node.py", "ControllerNode._duties")}
    # and a new active controller's abort of a metadata transaction its predecessor left open (KIP-868), from the
    # same callback, before it may decide anything
    assert _callers("propose_abort") == {("klog/controller/node.py", "ControllerNode._activate")}
    # a single voter appends from ClusterMetadata.commit (its QuorumWriter.commit: MetadataWriter.decide) and from
    # ClusterMetadata._bootstrap (a new cluster's first records and this start's registration, at construction,
    # before anything decides), nowhere else
    assert _callers("_commit") == {("klog/broker/cluster_metadata.py", "ClusterMetadata.commit"),
                                   ("klog/broker/cluster_metadata.py", "ClusterMetadata._bootstrap")}


def _single_voter_controller(tmp_path: Path) -> ControllerNode:
    from klog.broker.__main__ import controller_node, load_config
    from klog.testing.kafka import free_port

    port = free_port()
    config = load_config(None, [
        "process.roles=controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER", f"listeners=CONTROLLER://127.0.0.1:{port}",
        f"log.dirs={tmp_path / 'data'}", "metadata.max.idle.interval.ms=0"])   # no-ops only when the test asks
    node: ControllerNode = controller_node(config)
    return node


def test_a_members_own_writes_wait_for_the_decision_in_progress(tmp_path: Path) -> None:
    from klog.controller.quorum import Voter
    from klog.metadata.records import record

    async def scenario() -> None:
        controller = _single_voter_controller(tmp_path)
        await controller.start()
        try:
            await asyncio.wait_for(controller.wait_cluster_id(), 30)
            while not controller.applier.bootstrapped:   # the bootstrap records: proposed without the lock
                await asyncio.sleep(0.01)
            before = controller.image.highest_offset
            # a decision's records are appended only by MetadataWriter.decide, holding the lock
            with pytest.raises(AssertionError, match="MetadataWriter.decide"):
                await controller.appends.commit([record("NoOpRecord")])
            me = controller.quorum.voters[1]
            async with controller.decisions:   # a decision in progress
                assert not controller.appends.propose_noop(), "no no-op record while a decision runs"
                registering = asyncio.ensure_future(controller.register_controller(me, uuid.uuid4()))
                for _ in range(20):
                    await asyncio.sleep(0)
                assert not registering.done(), "the registration waits for the decision in progress"
                assert 1 not in controller.image.controllers
                assert controller.image.highest_offset == before, "nothing was appended meanwhile"
            await asyncio.wait_for(registering, 30)
            assert [(e.host, e.port) for e in controller.image.controllers[1].endpoints] == [(me.host, me.port)]
            assert controller.appends.propose_noop(), "a no-op once no decision runs"
        finally:
            await controller.stop()

    asyncio.run(scenario())
