"""Per-batch CPU of the broker's produce path, in process: from a decoded Produce request to its response.

Run: ``.venv/bin/pytest benches/bench_produce_path.py -p benchmark -o addopts="" -s``
Same run against another build, as ``bench_builds.py`` takes one: ``KLOG_BASELINE_TREE=/path/to/old/tree`` (a source
tree with its native extension built or copied in); rounds of the two builds alternate, and the summary prints
the ratio of this build to the baseline.

What one batch costs the Produce handler (``klog.broker.handlers.produce.handle_produce``), called directly on a
broker made of the real partition manager (native logs in a temporary directory, page cache, no fsync) and the
real producer-state manager: Kafka's request checks on the batch, the native record validation, the idempotent
producer's sequence check, the append, the producer-state update and the partition response. Not included:
sockets, request decoding, response encoding (see ``bench_broker.py`` for those). One partition per request,
one batch per partition, acks=1, every batch from one idempotent producer with consecutive sequences.

Each round is a fresh process (``python bench_produce_path.py CASE``, importing klog from the build's tree) that
appends BATCHES[case] batches and prints its CPU time (``time.process_time``) per batch; the figure is the minimum
over ROUNDS rounds.
No target is asserted: the figures are for comparing builds on the same machine in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import types
import uuid
from typing import Any

import pytest

ROUNDS = 5
TOPIC = "bench"
#: case -> (records per batch, value bytes, compression)
CASES: dict[str, tuple[int, int, str]] = {
    "1 record": (1, 100, "none"),
    "100 records": (100, 100, "none"),
    "100 records lz4": (100, 100, "lz4"),
}
#: batches appended per round, per case (about 2 s of CPU each)
BATCHES = {"1 record": 40_000, "100 records": 20_000, "100 records lz4": 10_000}
PRODUCER_ID = 1000


def _requests(case: str, count: int) -> list[Any]:
    """``count`` decoded Produce v9 requests (records are memoryviews of the frame, as the server decodes them),
    carrying consecutive batches of one idempotent producer."""
    from klog.protocol import decode_request, decode_request_header, encode_request
    from klog.records import encode_batch

    records, value_size, compression = CASES[case]
    value = b"v" * value_size
    decoded = []
    for i in range(count):
        batch = encode_batch([{"key": b"key-%d" % j, "value": value} for j in range(records)],
                             compression=compression, producer_id=PRODUCER_ID, producer_epoch=0,
                             base_sequence=(i * records) % 2**31)
        frame = memoryview(encode_request(0, 9, i, "bench", {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}))[4:]
        header, offset = decode_request_header(frame)
        decoded.append((header, decode_request(header, frame, offset)))
    return decoded


def measure(case: str, log_dir: str) -> float:
    """CPU seconds per batch of ``case`` through the produce handler of this interpreter's klog build."""
    from klog.broker.config import BrokerConfig
    from klog.broker.handlers import RequestContext
    from klog.broker.handlers.produce import handle_produce
    from klog.broker.partitions import PartitionManager
    from klog.broker.producer_state import ProducerStateManager
    from klog.broker.replication.manager import ReplicaManager

    config = BrokerConfig({"node.id": 1, "log.dirs": log_dir, "log.cleaner.enable": "false"})
    partitions = PartitionManager(config)
    partitions.apply_topic(TOPIC, uuid.uuid4(), {0: 0}, {})
    # access/transactions/quotas: no authorizer, transaction coordinator or quota hook, as a broker without
    # authorizer.class.name or quotas (a build before them ignores these names)
    broker = types.SimpleNamespace(partitions=partitions, replicas=ReplicaManager(1, config, partitions), metrics=None,
                                   config=config, producers=ProducerStateManager(log_dir, 86_400_000), access=None,
                                   transactions=None, quotas=None)
    requests = _requests(case, BATCHES[case])
    warmup = len(requests) // 10
    for header, request in requests[:warmup]:
        handle_produce(broker, RequestContext(header, "127.0.0.1", 1, 1), request)
    started = time.process_time()
    for header, request in requests[warmup:]:
        response = handle_produce(broker, RequestContext(header, "127.0.0.1", 1, 1), request)
    used = time.process_time() - started
    answer = response["responses"][0]["partition_responses"][0]
    assert answer["error_code"] == 0 and answer["base_offset"] > 0, answer
    partitions.log_manager.close()
    return used / (len(requests) - warmup)


#: the source tree of this build
THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_round(tree: str, case: str) -> float:
    """One round in a fresh process importing klog from ``tree``: its CPU microseconds per batch."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), case], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHONPATH": tree}, cwd=tempfile.gettempdir())
    if out.returncode:
        raise RuntimeError(f"{tree} {case}: {out.stderr[-2000:]}")
    answer = json.loads(out.stdout.splitlines()[-1])
    assert answer["klog"] == os.path.join(tree, "klog"), f"{tree}: klog imported from {answer['klog']}"
    return float(answer["us_per_batch"])


FIGURES: dict[str, float] = {}


@pytest.mark.timeout(3600)
def test_produce_path_cpu_per_batch(benchmark: Any) -> None:
    builds = {"this build": THIS_TREE}
    baseline = os.environ.get("KLOG_BASELINE_TREE")
    if baseline:
        builds["baseline"] = os.path.abspath(baseline)
    samples: dict[tuple[str, str], list[float]] = {(c, b): [] for c in CASES for b in builds}

    def one_round() -> None:
        order = list(builds.items())
        if len(samples[next(iter(samples))]) % 2:
            order.reverse()  # alternate which build goes first: neither always runs on a warmer machine
        for case in CASES:
            for name, tree in order:
                samples[(case, name)].append(run_round(tree, case))

    benchmark.group = "produce-path"
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    load = os.getloadavg()[0]
    print(f"\nproduce path CPU per batch (min of {ROUNDS} rounds), load {load:.2f}")
    for case in CASES:
        line = f"  {case:16s}"
        for name in builds:
            FIGURES[f"{case} {name} us/batch"] = figure = min(samples[(case, name)])
            line += f"  {name} {figure:6.2f} us"
        if baseline:
            ratio = FIGURES[f"{case} this build us/batch"] / FIGURES[f"{case} baseline us/batch"]
            FIGURES[f"{case} this build / baseline"] = ratio
            line += f"  ratio {ratio:.3f}"
        print(line)
    benchmark.extra_info.update(FIGURES, load_average=load)
    assert all(figure > 0 for figure in FIGURES.values())


if __name__ == "__main__":
    import klog

    with tempfile.TemporaryDirectory(prefix="klog-bench-produce-") as directory:
        print(json.dumps({"us_per_batch": measure(sys.argv[1], directory) * 1e6,
                          "klog": os.path.dirname(klog.__file__)}))
