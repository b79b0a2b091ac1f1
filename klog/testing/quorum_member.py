"""A Raft quorum member alone (the driver and the native node, without klog-broker's controller), driven over
stdin, for tests and benches of the Raft layer: ``python -m klog.testing.quorum_member --node-id 1
--voters 1@127.0.0.1:9101,2@... --dir DIR [--election-timeout-ms N ...]``.

It reads one command per line on stdin and answers one JSON line on stdout:
``status``; ``propose N`` (a batch of N NoOpRecords; answers the committed offset, or the
error); ``log`` (every committed entry: index, term, kind, base/next offset, data's CRC);
``snapshot`` (snapshot the applied state: one NoOpRecord batch); ``transfer ID``;
``bench N`` (N sequential one-record proposals, each awaited: commit latencies in ms); ``quit``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import zlib

from klog.controller.quorum import QuorumConfig
from klog.controller.raft import RaftDriver, RaftError
from klog.records import encode_batch

#: NoOpRecord (metadata api key 20, version 0): frame version 1, key, version, no tagged fields.
NOOP_RECORD_VALUE = bytes([1, 20, 0, 0])


def noop_batch(count: int) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([{"key": None, "value": NOOP_RECORD_VALUE, "timestamp": now}] * count)


async def serve(args: argparse.Namespace) -> None:
    props = {
        "node.id": str(args.node_id),
        "controller.quorum.voters": args.voters,
        "controller.quorum.election.timeout.ms": str(args.election_timeout_ms),
        "controller.quorum.fetch.timeout.ms": str(args.fetch_timeout_ms),
        "controller.quorum.election.backoff.max.ms": str(args.election_backoff_max_ms),
    }
    driver = RaftDriver(QuorumConfig.from_properties(props), args.dir)
    committed: list[dict[str, object]] = []
    driver.add_committed_listener(
        lambda i, t, k, d, b, n: committed.append({"index": i, "term": t, "kind": k, "base": b, "next": n, "crc": zlib.crc32(d)})
    )
    await driver.start()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def reply(obj: dict[str, object]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    reply({"ready": True, "node_id": args.node_id})
    try:
        while line := (await reader.readline()).decode().strip():
            cmd, *rest = line.split()
            if cmd == "quit":
                break
            if cmd == "status":
                reply({"node_id": args.node_id, "leader_id": driver.leader_id, "role": driver.role, "term": driver.term,
                       "applied": driver.applied_index})
            elif cmd == "propose":
                try:
                    offset = await asyncio.wait_for(driver.propose(noop_batch(int(rest[0]))), args.propose_timeout)
                    reply({"offset": offset})
                except (RaftError, asyncio.TimeoutError) as e:
                    reply({"error": type(e).__name__, "message": str(e), "leader_id": driver.leader_id})
            elif cmd == "bench":
                lat = []
                batch = noop_batch(1)
                for _ in range(int(rest[0])):
                    t0 = time.perf_counter()
                    await driver.propose(batch)
                    lat.append((time.perf_counter() - t0) * 1000)
                reply({"latencies_ms": lat})
            elif cmd == "log":
                reply({"entries": committed})
            elif cmd == "snapshot":
                try:
                    path = await driver.create_snapshot(driver.applied_index, noop_batch(1))
                    reply({"snapshot": path, "index": driver.applied_index})
                except RaftError as e:
                    reply({"error": type(e).__name__, "message": str(e)})
            elif cmd == "transfer":
                driver.transfer_leader(int(rest[0]))
                reply({"ok": True})
            else:
                reply({"error": "UnknownCommand", "message": line})
    finally:
        await driver.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m klog.testing.quorum_member", description=__doc__)
    ap.add_argument("--node-id", type=int, required=True)
    ap.add_argument("--voters", required=True, help="controller.quorum.voters, e.g. 1@127.0.0.1:9101,...")
    ap.add_argument("--dir", required=True, help="the __cluster_metadata-0 directory")
    ap.add_argument("--election-timeout-ms", type=int, default=1000)
    ap.add_argument("--fetch-timeout-ms", type=int, default=2000)
    ap.add_argument("--election-backoff-max-ms", type=int, default=1000)
    ap.add_argument("--propose-timeout", type=float, default=10.0)
    from klog.broker.__main__ import run

    run(serve(ap.parse_args(argv)))  # uvloop when installed, as klog-broker


if __name__ == "__main__":
    main()
