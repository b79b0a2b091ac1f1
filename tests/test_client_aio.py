"""klog.aio: the asyncio twins of Producer, Consumer and AdminClient, against Apache Kafka and klog's broker."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import klog.aio
from klog.client import RecordMetadata, TopicPartition
from klog.client.errors import KafkaError
from klog.partitioner import partition_for_key

DEADLINE_S = 30.0


async def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"a-{uuid.uuid4().hex[:12]}"
    async with klog.aio.AdminClient(bootstrap) as admin:
        await admin.create_topics([name], num_partitions=partitions, replication_factor=1)
    return name


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_async_producer_send_and_send_and_wait(bootstrap: str) -> None:
    async def main() -> None:
        topic = await new_topic(bootstrap, 3)
        async with klog.aio.Producer(bootstrap, linger_ms=2) as p:
            futures = [await p.send(topic, b"v%d" % i, key=b"k%d" % i) for i in range(300)]
            md = await p.send_and_wait(topic, b"last", key=b"k0")
            metas = await asyncio.gather(*futures)
        assert isinstance(md, RecordMetadata)
        assert all(m.partition == partition_for_key(b"k%d" % i, 3) for i, m in enumerate(metas))
        by_part: dict[int, list[int]] = {}
        for m in metas:
            by_part.setdefault(m.partition, []).append(m.offset)
        assert all(offs == list(range(len(offs))) for offs in by_part.values())

    run(main())


def test_async_send_batch_then_poll_batch(bootstrap: str) -> None:
    async def main() -> None:
        topic = await new_topic(bootstrap)
        values = np.array([b"%06d" % i for i in range(5000)], dtype="S6")
        async with klog.aio.Producer(bootstrap) as p:
            fut = await p.send_batch(topic, values)
            batches = await fut
        assert sum(b.record_count for b in batches) == 5000
        async with klog.aio.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([(topic, 0)])
            got: list[pa.RecordBatch] = []
            rows = 0
            deadline = time.monotonic() + DEADLINE_S
            while rows < 5000 and time.monotonic() < deadline:
                b = await c.poll_batch(timeout=1.0)
                got.append(b)
                rows += b.num_rows
        table = pa.Table.from_batches([b for b in got if b.num_rows])
        assert table.column("value").to_pylist() == values.tolist()
        assert table.column("offset").to_pylist() == list(range(5000))

    run(main())


def test_async_consumer_group_with_async_callbacks_and_commit(bootstrap: str) -> None:
    async def main() -> None:
        topic = await new_topic(bootstrap, 2)
        group = f"g-{uuid.uuid4().hex[:8]}"
        async with klog.aio.Producer(bootstrap) as p:
            for i in range(40):
                await p.send(topic, b"%d" % i, key=b"k%d" % i)
        assigned: list[list[TopicPartition]] = []

        async def on_assign(consumer: Any, parts: list[TopicPartition]) -> None:
            await asyncio.sleep(0)
            assigned.append(parts)

        async with klog.aio.Consumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     on_assign=on_assign) as c:
            got: list[Any] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 40 and time.monotonic() < deadline:
                got += await c.poll(timeout=0.5)
            assert sorted(r.value for r in got) == sorted(b"%d" % i for i in range(40))
            assert assigned and set(assigned[0]) == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
            await c.commit()
            committed = await c.committed([(topic, 0), (topic, 1)])
            assert sum(o.offset for o in committed.values() if o is not None) == 40

    run(main())


def test_async_iteration_and_seek(bootstrap: str) -> None:
    async def main() -> None:
        topic = await new_topic(bootstrap)
        async with klog.aio.Producer(bootstrap) as p:
            for i in range(20):
                await p.send(topic, b"%d" % i)
        async with klog.aio.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 15)
            got = []
            async for r in c:
                got.append(r.offset)
                if len(got) == 5:
                    break
            assert got == [15, 16, 17, 18, 19]
            assert await c.end_offsets([tp]) == {tp: 20}
            assert await c.position(tp) == 20

    run(main())


def test_async_admin_operations(bootstrap: str) -> None:
    async def main() -> None:
        async with klog.aio.AdminClient(bootstrap) as admin:
            name = f"adm-{uuid.uuid4().hex[:8]}"
            await admin.create_topics([name], num_partitions=2, replication_factor=1)
            assert name in await admin.list_topics()
            assert len((await admin.describe_topics([name]))[name].partitions) == 2
            await admin.create_partitions({name: 3})
            assert len((await admin.describe_topics([name]))[name].partitions) == 3
            with pytest.raises(KafkaError):
                await admin.create_topics([name], num_partitions=1, replication_factor=1)
            await admin.delete_topics([name])
            assert name not in await admin.list_topics()
            cluster = await admin.describe_cluster()
            assert cluster["brokers"]

    run(main())


def test_async_clients_must_be_started(bootstrap: str) -> None:
    async def main() -> None:
        p = klog.aio.Producer(bootstrap)
        with pytest.raises(KafkaError, match="start"):
            await p.send("t", b"x")
        await p.close()

    run(main())
