"""SIGKILL a klog-broker while its log cleaner works, at seeded random moments, and restart it: no key ever loses
its latest acknowledged value and every segment stays readable (cleaner swaps are rolled back or completed when the
log opens). ``KLOG_COMPACTION_CHAOS_ROUNDS`` rounds (default 8; ``make chaos-compaction`` runs 300) with seed
``KLOG_COMPACTION_CHAOS_SEED``.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402

from klog.testing.process import BrokerProcess, data_dir_for  # noqa: E402
from test_compaction import compacted_configs, create_topic, read_all  # noqa: E402
from test_storage_oracle import ERROR_MARKERS, LIBS, run_dump, segment_files  # noqa: E402

ROUNDS = int(os.environ.get("KLOG_COMPACTION_CHAOS_ROUNDS", "8"))
SEED = int(os.environ.get("KLOG_COMPACTION_CHAOS_SEED", "1834"))
KEYS = 120


@pytest.mark.timeout(120 + 10 * ROUNDS)  # a round takes 1-3 s (restart, produce, read back)
def test_sigkill_during_cleaning_never_loses_the_latest_value_of_a_key(tmp_path):
    rng = random.Random(SEED)
    data = data_dir_for(tmp_path)
    topic = "chaos"
    latest: dict[bytes, bytes | None] = {}
    broker = BrokerProcess(data, {"log.cleaner.backoff.ms": 5, "log.segment.delete.delay.ms": 0})
    kills_while_swapping = 0
    try:
        for round_ in range(ROUNDS):
            broker.start()
            if round_ == 0:
                create_topic(broker.bootstrap_servers, topic, compacted_configs(3_000))
            else:
                # What the last (killed) round acknowledged is all there, the latest per key last.
                records = read_all(broker.bootstrap_servers, topic)
                seen: dict[bytes, bytes | None] = {}
                for _, k, v in records:
                    seen[k] = v
                assert seen == latest, f"round {round_}: lost or stale values after SIGKILL"
                offsets = [o for o, _, _ in records]
                assert offsets == sorted(set(offsets))
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": rng.choice([0, 2, 10])})
            acked: list[tuple[bytes, bytes | None]] = []

            def on_delivery(err, msg, acked=acked):  # noqa: ANN001 - confluent callback
                if err is None:
                    acked.append((msg.key(), msg.value()))

            for i in range(rng.randrange(200, 900)):
                k = b"key-%d" % rng.randrange(KEYS)
                v = None if rng.random() < 0.05 else b"r%d-%d-" % (round_, i) + b"x" * rng.randrange(0, 60)
                producer.produce(topic, key=k, value=v, partition=0, on_delivery=on_delivery)
                if i % 50 == 0:
                    producer.poll(0)
            assert producer.flush(30) == 0
            del producer
            for k, v in acked:
                latest[k] = v
            # Let the cleaner run, then kill the broker somewhere in its work.
            time.sleep(rng.uniform(0, 0.4))
            files = os.listdir(os.path.join(data, f"{topic}-0"))
            kills_while_swapping += any(f.endswith((".cleaned", ".swap")) for f in files)
            broker.kill()
        broker.start()
        records = read_all(broker.bootstrap_servers, topic)
        assert {k: v for _, k, v in records} == latest
        broker.stop()
    finally:
        broker.kill()
    print(f"{ROUNDS} rounds, {kills_while_swapping} kills with cleaner files present")
    # Kafka's own reader agrees, segment by segment (where Java and the Kafka jars are installed).
    if shutil.which("java") is not None and list(LIBS.glob("kafka-tools-*.jar")):
        logs = [f for f in segment_files(os.path.join(data, f"{topic}-0")) if f.endswith(".log")]
        out = run_dump(logs, "--deep-iteration", "--print-data-log")
        bad = [line for line in out.splitlines() if any(m in line for m in ERROR_MARKERS)]
        assert not bad, "\n".join(bad[:20])
        dumped = re.findall(r"^\| offset: (\d+) CreateTime: -?\d+ .*? key: (\S+)", out, re.M)
        offsets = [int(o) for o, _ in dumped]
        assert offsets == sorted(set(offsets))
        # The cleaner may have run again after the read: the same latest offset of every key, maybe fewer records.
        assert {k.encode(): int(o) for o, k in dumped} == {k: o for o, k, _ in records}
