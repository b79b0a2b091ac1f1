"""Bytes a share coordinator writes to ``__share_group_state`` for one acknowledgement workload (issue 35).

    PYTHONPATH=$PWD .venv/bin/python benches/bench_share_state_bytes.py [--kafka] [--records 1000] [--per-commit 20]

One explicit-mode klog ``ShareConsumer`` of a fresh group (``share.auto.offset.reset=earliest``) holds all RECORDS
records of a 1-partition topic at once (locks of 60 s, ``group.share.partition.max.record.locks=2000``), then
acknowledges them in a shuffled order (a fixed seed), PER_COMMIT per ``commit_sync`` (each commit is one state
write): the worst case for a share-partition's state, which is then many small state batches. Written bytes are the
sizes of the ``__share_group_state`` segment files once the broker stopped, pruning off
(``share.coordinator.state.topic.prune.interval.ms`` at its largest); "retained" (klog only) are the bytes from
the state partitions' log start offsets on (what a coordinator taking over reads) after a few passes of a
1-second prune interval. The klog broker runs in this process from the klog on PYTHONPATH, so the same script
measures another checkout's build (``PYTHONPATH=/path/to/other/checkout``). ``--kafka`` runs the same workload on
Apache Kafka 4.3 (one node, its jars from tools/install-peers.sh).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

import klog
import klog.records
from klog.client.admin import ConfigResource

PROPERTIES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
              "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
              "group.share.record.lock.duration.ms": 60000, "group.share.max.record.lock.duration.ms": 60000,
              "group.share.partition.max.record.locks": 2000, "offsets.topic.replication.factor": 1,
              "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1}
NO_PRUNING = {"share.coordinator.state.topic.prune.interval.ms": 2**31 - 1}
PRUNING = {"share.coordinator.state.topic.prune.interval.ms": 1000}


def workload(bootstrap: str, records: int, per_commit: int, seed: int) -> None:
    topic, group = f"acks-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with klog.AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([klog.client.NewTopic(topic, 1, 1)])
        admin.alter_configs({ConfigResource("group", group): {"share.auto.offset.reset": "earliest"}})
    with klog.Producer(bootstrap_servers=bootstrap) as p:
        for i in range(records):
            p.send(topic, value=b"r%d" % i, partition=0)
        p.flush()
    with klog.ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                            acknowledgement_mode="explicit") as c:
        held = []
        deadline = time.monotonic() + 120
        while len(held) < records:
            assert time.monotonic() < deadline, f"{len(held)} of {records} records delivered"
            held.extend(c.poll(timeout=1.0))
        random.Random(seed).shuffle(held)
        for i in range(0, records, per_commit):
            for r in held[i:i + per_commit]:
                c.acknowledge(r, "accept")
            outcome = c.commit_sync()
            assert all(err is None for err in outcome.values()), outcome


def state_bytes(data_dir: Path) -> int:
    return sum(f.stat().st_size for f in data_dir.glob("**/__share_group_state-*/*.log"))


def readable_bytes(broker: klog.Broker) -> int:
    """The bytes of ``__share_group_state`` from each partition's log start offset on (the embedded broker's logs)."""
    manager = broker._server.state.partitions
    total = 0
    for (topic, _), plog in manager.logs():
        if topic != "__share_group_state":
            continue
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset, min_one_batch=True).to_bytes()
            if not data:
                break
            batches = klog.records.decode_batches(data, allow_partial_trailing=True)
            total += sum(b.size for b in batches)
            offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1
    return total


def on_klog(records: int, per_commit: int, seed: int, *, prune: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="klog-share-bytes-") as tmp:
        data = Path(tmp) / "data"
        with klog.Broker(str(data), config={**PROPERTIES, **(PRUNING if prune else NO_PRUNING)}) as b:
            workload(b.bootstrap_servers, records, per_commit, seed)
            if prune:
                time.sleep(3)   # a few prune passes
                return readable_bytes(b)
        return state_bytes(data)


def on_kafka(records: int, per_commit: int, seed: int, *, prune: bool) -> int:
    from klog.testing.kafka import apache_kafka

    with tempfile.TemporaryDirectory(prefix="kafka-share-bytes-") as tmp:
        with apache_kafka(tmp, config={**PROPERTIES, **(PRUNING if prune else NO_PRUNING)}, heap="512m") as bootstrap:
            workload(str(bootstrap), records, per_commit, seed)
            if prune:
                time.sleep(3)
        return state_bytes(Path(tmp) / "kafka-data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--per-commit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--kafka", action="store_true", help="also on Apache Kafka 4.3")
    args = parser.parse_args()
    out = {"klog": klog.__file__, "records": args.records, "per_commit": args.per_commit, "seed": args.seed,
           "klog_written_bytes": on_klog(args.records, args.per_commit, args.seed, prune=False),
           "klog_retained_bytes": on_klog(args.records, args.per_commit, args.seed, prune=True)}
    if args.kafka:
        out["kafka_written_bytes"] = on_kafka(args.records, args.per_commit, args.seed, prune=False)
        out["kafka_retained_bytes"] = on_kafka(args.records, args.per_commit, args.seed, prune=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
