"""The workload of a fault run: producer and consumer OS processes logging into the history.

- producers (``acks=all``, ``enable.idempotence=true``), confluent-kafka (``p0``, ``p2``, ...) and klog's own
  client (``k1``, ``k3``, ...) in turn, send unique values ``<process>-<seq>`` round-robin to
  the topic's partitions at a bounded rate; a delivery report with an offset is ``ok``, any delivery error
  (timeouts included) is ``info`` (indeterminate: the write may or may not be stored), a ``produce()`` the
  client refused before sending is ``fail``. A producer hit by a fatal error starts a new incarnation
  (``p0.1``, ...): per-producer order is only promised within one idempotent session.
- consumers (confluent-kafka) read every partition, with ``assign`` (no group) or ``subscribe`` (one group; each assignment
  starts a new ``generation``), and commit their position every few polls.

- transactional producers (``transactional=True``, confluent-kafka or with ``txn_client="java"`` Apache Kafka's Java
  client through ``TxnDriver.java``, ``t0``, ``t1``, ...) instead: each transaction
  writes :data:`TXN_SIZE` unique values ``<txn>-<i>`` over the partitions and commits, every
  :data:`TXN_ABORT_EVERY`-th is aborted on purpose; a commit that fails or times out is indeterminate (``info``),
  and the producer starts a new incarnation with the same ``transactional.id`` (which fences the old one). Consumers
  and the final read are then read_committed (:mod:`klog.testing.faults.checker` looks for aborted reads, torn
  transactions and lost committed ones).

Each process writes its own history file and stops when ``stop_file`` appears (or after ``max_seconds``).

    with Workload(tmp, bootstrap, topic, partitions=3, producers=2, consumers=("assign", "subscribe")) as w:
        ...                     # faults
    w.history_files             # merge with the nemesis's file
    final_read(bootstrap, topic, 3)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol

from klog.testing.faults.history import HistoryWriter

__all__ = ["Workload", "final_read", "create_topic"]

#: bounds of one run's traffic
MAX_RATE_PER_PRODUCER = 1000
MAX_SECONDS = 6 * 3600
CONSUME_BATCH = 200
COMMIT_EVERY_POLLS = 10
#: values per transaction (spread over the partitions) and how often one is aborted on purpose
TXN_SIZE = 4
TXN_ABORT_EVERY = 4
#: the transactional producer's bounds: its transactions' timeout, and each call's
TXN_TIMEOUT_MS = 10000
TXN_CALL_S = 15.0


def producer_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "delivery.timeout.ms": 15000, "request.timeout.ms": 5000, "message.send.max.retries": 1_000_000,
            "socket.timeout.ms": 5000, "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 1000}


def klog_producer_config() -> dict[str, Any]:
    """klog's client with the same promises and timeouts as :func:`producer_config`."""
    return {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "delivery.timeout.ms": 15000,
            "request.timeout.ms": 5000, "max.block.ms": 5000, "reconnect.backoff.max.ms": 1000,
            "metadata.max.age.ms": 1000}


class _ProducerClient(Protocol):
    """What the producer loop needs of a client: queue a send whose outcome comes to ``report(error, offset)``
    from within ``serve``."""

    def produce(self, topic: str, value: str, partition: int, report: Any) -> None: ...

    def serve(self, timeout: float) -> None: ...

    def refused(self, e: BaseException) -> bool: ...

    def close(self) -> None: ...


class _ConfluentProducer:
    """confluent-kafka (librdkafka): delivery reports fire inside ``serve`` (``poll``)."""

    def __init__(self, bootstrap: str, fatal: list[str]) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(producer_config(bootstrap),
                                 error_cb=lambda err: fatal.append(str(err)) if err.fatal() else None)
        self.fatal = fatal

    def produce(self, topic: str, value: str, partition: int, report: Any) -> None:
        self.producer.produce(topic, value=value.encode(), partition=partition,
                              on_delivery=lambda err, msg: report(None if err is None else str(err),
                                                                  None if err is not None else msg.offset()))

    def serve(self, timeout: float) -> None:
        from confluent_kafka import KafkaException

        try:
            self.producer.poll(timeout)
        except KafkaException as e:  # a fatal error surfaces here too
            self.fatal.append(str(e))

    def refused(self, e: BaseException) -> bool:
        """Whether ``e`` from ``produce`` means nothing was sent (else it propagates)."""
        from confluent_kafka import KafkaException

        if isinstance(e, KafkaException) and e.args[0].fatal():
            self.fatal.append(str(e))
        return isinstance(e, (BufferError, KafkaException))

    def close(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self.producer.flush(30)
        except KafkaException as e:
            self.fatal.append(str(e))


class _KlogProducer:
    """klog's own client (``klog.client.Producer``): its delivery callbacks run on the client's event-loop
    thread, so they only queue the outcome; ``serve`` reports them on the producer's own thread."""

    def __init__(self, bootstrap: str, fatal: list[str]) -> None:
        import queue

        from klog.client import Producer

        self.producer = Producer(bootstrap, **klog_producer_config())
        self.done: queue.SimpleQueue[tuple[Any, str | None, int | None]] = queue.SimpleQueue()
        self.fatal = fatal

    def produce(self, topic: str, value: str, partition: int, report: Any) -> None:
        def delivered(err: BaseException | None, md: Any) -> None:
            self.done.put((report, None if err is None else f"{type(err).__name__}: {err}",
                           None if err is not None else md.offset))

        self.producer.send(topic, value.encode(), partition=partition, on_delivery=delivered)

    def serve(self, timeout: float) -> None:
        import queue

        deadline = time.monotonic() + timeout
        while True:
            try:
                report, err, offset = self.done.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            report(err, offset)

    def refused(self, e: BaseException) -> bool:
        from klog.client.errors import ClientClosedError, KafkaError

        if isinstance(e, ClientClosedError):  # the sender stopped for good: a new producer takes over
            self.fatal.append(str(e))
        return isinstance(e, (KafkaError, ClientClosedError, TimeoutError))

    def close(self) -> None:
        try:
            self.producer.close(30)
        except Exception as e:  # noqa: BLE001 - what it never reported is logged as indeterminate
            self.fatal.append(f"{type(e).__name__}: {e}")
        self.serve(0)


#: the producer clients the workload can run (``--client``)
PRODUCER_CLIENTS: dict[str, Callable[[str, list[str]], _ProducerClient]] = {
    "confluent": _ConfluentProducer, "klog": _KlogProducer}
PRODUCER_CLIENT_ORDER = ("confluent", "klog")
#: a producer process's name says which client it runs
PROCESS_PREFIX = {"confluent": "p", "klog": "k"}


def run_producer(args: argparse.Namespace) -> None:
    history = HistoryWriter(args.history, args.process)
    stop, deadline = Path(args.stop_file), time.monotonic() + args.max_seconds
    interval = 1.0 / args.rate
    incarnation, seq = 0, 0
    process = args.process
    fatal: list[str] = []
    outstanding: dict[str, tuple[int, str]] = {}  # value -> (partition, process) of sends not yet reported
    client = PRODUCER_CLIENTS[args.client]

    def abandon(p: _ProducerClient, why: str) -> None:
        """Give the producer a last chance to report, then log what it never reported as indeterminate."""
        for _ in range(10):
            if not outstanding:
                break
            p.serve(0.5)
        for value, (partition, proc) in list(outstanding.items()):
            history.log("info", "send", partition=partition, value=value, error=why, process=proc)
        outstanding.clear()

    producer = client(args.bootstrap, fatal)
    next_at = time.monotonic()
    while not stop.exists() and time.monotonic() < deadline:
        if fatal:  # a fatal idempotence error: this session is over, start a new producer
            abandon(producer, f"producer abandoned after a fatal error: {fatal[0]}")
            incarnation += 1
            process = f"{args.process}.{incarnation}"
            fatal.clear()
            producer = client(args.bootstrap, fatal)
        partition = seq % args.partitions
        value = f"{args.process}-{seq}"
        seq += 1
        proc_name = process

        def report(err: str | None, offset: int | None, value: str = value, partition: int = partition,
                   proc: str = proc_name) -> None:
            outstanding.pop(value, None)
            if err is None:
                history.log("ok", "send", partition=partition, value=value, offset=offset, process=proc)
            else:
                history.log("info", "send", partition=partition, value=value, error=err, process=proc)

        history.log("invoke", "send", partition=partition, value=value, process=proc_name)
        try:
            outstanding[value] = (partition, proc_name)
            producer.produce(args.topic, value, partition, report)
        except Exception as e:  # noqa: BLE001 - refused before anything was sent, if the client says so
            if not producer.refused(e):
                raise
            outstanding.pop(value, None)
            history.log("fail", "send", partition=partition, value=value, error=str(e), process=proc_name)
        producer.serve(0)
        # a bounded rate; time lost while the client blocked is not made up in a burst
        next_at = max(next_at + interval, time.monotonic() - interval)
        delay = next_at - time.monotonic()
        if delay > 0:
            producer.serve(delay)
    producer.close()
    left = len(outstanding)
    abandon(producer, "no delivery report before the producer stopped")
    print(f"{args.process} ({args.client}): {seq} sends, {left} without a delivery report at exit", flush=True)
    history.close()


def txn_producer_config(bootstrap: str, transactional_id: str) -> dict[str, Any]:
    return {**producer_config(bootstrap), "transactional.id": transactional_id,
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "delivery.timeout.ms": TXN_TIMEOUT_MS}


#: a transaction's outcome as a client reports it: (history type "ok" / "fail" / "info", error, producer still usable,
#: transaction protocol version the client ran it with or None if unknown)
TxnOutcome = tuple[str, str | None, bool, int | None]


class _ConfluentTxnProducer:
    """confluent-kafka's transactional producer (librdkafka: transaction protocol v1)."""

    protocol = 1

    def __init__(self, bootstrap: str, transactional_id: str, topic: str) -> None:
        self.bootstrap, self.transactional_id, self.topic = bootstrap, transactional_id, topic
        self.producer: Any = None
        # producers given up on are kept, not destroyed: librdkafka's destructor may block on a broker that is gone
        self.abandoned: list[Any] = []

    def init(self) -> str | None:
        from confluent_kafka import KafkaException, Producer

        self.producer = Producer(txn_producer_config(self.bootstrap, self.transactional_id))
        try:
            self.producer.init_transactions(TXN_CALL_S)
            return None
        except KafkaException as e:
            self.abandoned.append(self.producer)
            return str(e)

    def txn(self, values: list[list[Any]], intent: str) -> TxnOutcome:
        from confluent_kafka import KafkaException

        producer, committing = self.producer, False
        try:
            producer.begin_transaction()
            for partition, value in values:
                producer.produce(self.topic, value=value.encode(), partition=partition)
            if intent == "abort":
                producer.abort_transaction(TXN_CALL_S)
                return "fail", "aborted on purpose", True, self.protocol
            committing = True
            producer.commit_transaction(TXN_CALL_S)
            return "ok", None, True, self.protocol
        except (KafkaException, BufferError) as e:
            error = str(e)
            if isinstance(e, KafkaException) and e.args[0].txn_requires_abort():
                try:
                    producer.abort_transaction(TXN_CALL_S)
                    return "fail", error, True, self.protocol
                except KafkaException as again:
                    error += f"; abort: {again}"
            self.abandoned.append(producer)
            # never asked to commit: nothing can commit it (a successor's init_transactions aborts it)
            return ("info" if committing else "fail"), error, False, self.protocol

    def close(self) -> bool:
        """True if the process must exit without running destructors (see ``abandoned``)."""
        return bool(self.abandoned)


class _JavaTxnProducer:
    """Apache Kafka's Java client (transaction protocol v2 where the cluster finalizes transaction.version 2)
    through the long-running driver ``TxnDriver.java`` next to this module, compiled by :func:`java_txn_driver`."""

    #: how long one driver command may take beyond the client's own call timeout before the JVM is killed
    SLACK_S = 30.0

    def __init__(self, bootstrap: str, transactional_id: str, topic: str, classes: str) -> None:
        import queue
        import threading

        from klog.testing.kafka import find_kafka_libs

        self.proc = subprocess.Popen(
            ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.level=ERROR",
             "-cp", f"{classes}:{find_kafka_libs()}/*", "TxnDriver", bootstrap, topic, transactional_id,
             str(TXN_TIMEOUT_MS), str(int(TXN_CALL_S * 1000))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.answers: queue.SimpleQueue[str | None] = queue.SimpleQueue()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.answers.put(line.rstrip("\n"))
            self.answers.put(None)

        threading.Thread(target=read, daemon=True).start()

    def _ask(self, command: str) -> str:
        import queue

        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        try:
            answer = self.answers.get(timeout=2 * TXN_CALL_S + self.SLACK_S)
        except queue.Empty:
            answer = None
        if answer is None:
            raise RuntimeError(f"the Java transactional driver did not answer {command.split()[0]!r} "
                               f"(exit {self.proc.poll()})")
        return answer

    def init(self) -> str | None:
        answer = self._ask("init")
        return None if answer == "ok" else answer.removeprefix("err ")

    def txn(self, values: list[list[Any]], intent: str) -> TxnOutcome:
        answer = self._ask(" ".join(["txn", intent, *(f"{p} {v}" for p, v in values)]))
        word, tv, rest = (answer.split(" ", 2) + ["", ""])[:3]
        protocol = int(tv) if tv.isdigit() and int(tv) > 0 else None
        if word == "ok":
            return "ok", None, True, protocol
        if word == "aborted":
            return "fail", "aborted on purpose", True, protocol
        if word == "failed-aborted":
            return "fail", rest, True, protocol
        committing, _, error = rest.partition(" ")
        return ("info" if committing == "committing" else "fail"), error, False, protocol

    def close(self) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
        return False


#: the transactional producer clients (``txn-producer --client``): confluent-kafka (protocol v1) or the Java client
TXN_CLIENTS = ("confluent", "java")


def java_txn_driver(directory: str | Path) -> Path:
    """Compiles ``TxnDriver.java`` against the Apache Kafka jars into ``directory``; returns the classes' path."""
    from klog.testing.kafka import find_kafka_libs

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).with_name("TxnDriver.java")
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", f"{find_kafka_libs()}/*", str(source)], check=True,
                   capture_output=True, timeout=180)
    return out


def run_txn_producer(args: argparse.Namespace) -> None:
    """Transactions of :data:`TXN_SIZE` values each, logged as ``f="txn"`` (see :mod:`klog.testing.faults.history`);
    a completion carries ``protocol``, the transaction protocol version the client ran it with."""
    history = HistoryWriter(args.history, args.process)
    stop, deadline = Path(args.stop_file), time.monotonic() + args.max_seconds
    interval = 1.0 / args.rate
    transactional_id = f"faults-{args.topic}-{args.process}"
    incarnation, n = 0, 0
    client: _ConfluentTxnProducer | _JavaTxnProducer
    if args.client == "java":
        client = _JavaTxnProducer(args.bootstrap, transactional_id, args.topic, args.java_classes)
    else:
        client = _ConfluentTxnProducer(args.bootstrap, transactional_id, args.topic)

    def start() -> bool:
        """A producer whose init_transactions succeeded (fencing any earlier one); False once stopping."""
        while not stop.exists() and time.monotonic() < deadline:
            if client.init() is None:
                return True
            time.sleep(0.5)
        return False

    ready = start()
    next_at = time.monotonic()
    while ready and not stop.exists() and time.monotonic() < deadline:
        process = args.process if incarnation == 0 else f"{args.process}.{incarnation}"
        txn = f"{args.process}-t{n}"
        values = [[(n + i) % args.partitions, f"{txn}-{i}"] for i in range(TXN_SIZE)]
        intent = "abort" if n % TXN_ABORT_EVERY == TXN_ABORT_EVERY - 1 else "commit"
        n += 1
        history.log("invoke", "txn", txn=txn, values=values, intent=intent, process=process)
        outcome, error, usable, protocol = client.txn(values, intent)
        history.log(outcome, "txn", txn=txn, process=process, error=error, protocol=protocol)
        if not usable:
            incarnation += 1
            ready = start()
        next_at = max(next_at + interval, time.monotonic() - interval)
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    print(f"{args.process} (transactional, {args.client}): {n} transactions, {incarnation} restarts", flush=True)
    history.close()
    if client.close():   # see _ConfluentTxnProducer.abandoned: exit without running their destructors
        import os

        sys.stdout.flush()
        os._exit(0)


def _record(m: Any) -> tuple[int, int, str]:
    """(partition, offset, value) of a consumed message (every value the workload writes is text)."""
    return int(m.partition()), int(m.offset()), bytes(m.value() or b"").decode()


def run_consumer(args: argparse.Namespace) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    history = HistoryWriter(args.history, args.process)
    stop, deadline = Path(args.stop_file), time.monotonic() + args.max_seconds
    generation = [0]
    config = {"bootstrap.servers": args.bootstrap, "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "socket.timeout.ms": 5000,
              "topic.metadata.refresh.interval.ms": 1000,
              "isolation.level": "read_committed",
              "group.id": args.group if args.mode == "subscribe" else f"{args.group}-{args.process}"}
    consumer = Consumer(config)

    def on_assign(c: Any, partitions: Any) -> None:
        generation[0] += 1

    if args.mode == "subscribe":
        consumer.subscribe([args.topic], on_assign=on_assign)
    else:
        generation[0] = 1
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    polls = 0
    while not stop.exists() and time.monotonic() < deadline:
        history.log("invoke", "poll")
        msgs = consumer.consume(CONSUME_BATCH, 0.5)
        records, errors = [], []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    errors.append(str(err))
                continue
            records.append(list(_record(m)))
        history.log("ok", "poll", records=records, generation=generation[0], mode=args.mode,
                    error="; ".join(errors) or None)
        polls += 1
        if args.mode == "subscribe" and records and polls % COMMIT_EVERY_POLLS == 0:
            history.log("invoke", "commit")
            try:
                done = consumer.commit(asynchronous=False)
                history.log("ok", "commit", offsets=[[tp.partition, tp.offset] for tp in done or []])
            except Exception as e:  # noqa: BLE001 - a commit under faults may fail either way
                history.log("info", "commit", error=str(e))
    consumer.close()
    history.close()


class Workload:
    def __init__(self, root: str | Path, bootstrap: str, topic: str, *, partitions: int, producers: int = 2,
                 consumers: tuple[str, ...] = ("assign", "subscribe"), rate: int = 50,
                 max_seconds: float = 3600, producer_clients: tuple[str, ...] = PRODUCER_CLIENT_ORDER,
                 transactional: bool = False, txn_client: str = "confluent") -> None:
        """``transactional``: the producers are transactional (``t0``, ``t1``, ..., ``rate`` transactions a second
        each) instead of idempotent ones, on ``txn_client``: confluent-kafka (transaction protocol v1) or Apache
        Kafka's Java client (``java``: protocol v2 where the cluster finalizes transaction.version 2)."""
        assert txn_client in TXN_CLIENTS, txn_client
        assert 1 <= rate <= MAX_RATE_PER_PRODUCER and 0 < max_seconds <= MAX_SECONDS
        assert producer_clients and all(c in PRODUCER_CLIENTS for c in producer_clients), producer_clients
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.stop_file = self.root / "stop"
        self.procs: list[subprocess.Popen[bytes]] = []
        #: processes that did not stop within the timeout and were killed (not counted as crashed)
        self.killed_at_stop: list[int] = []
        self.history_files: list[Path] = []
        common = ["--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions),
                  "--stop-file", str(self.stop_file), "--max-seconds", str(max_seconds)]
        # producers take the clients in turn: p0 confluent-kafka, k1 klog's client, p2 confluent-kafka, ...
        clients = [producer_clients[i % len(producer_clients)] for i in range(producers)]
        self.specs = [["producer", "--process", f"{PROCESS_PREFIX[c]}{i}", "--rate", str(rate), "--client", c, *common]
                      for i, c in enumerate(clients)]
        if transactional:
            client = ["--client", txn_client]
            if txn_client == "java":
                client += ["--java-classes", str(java_txn_driver(self.root / "java-classes"))]
            self.specs = [["txn-producer", "--process", f"t{i}", "--rate", str(rate), *client, *common]
                          for i in range(producers)]
        self.specs += [["consumer", "--process", f"c{i}", "--mode", mode, "--group", f"faults-{topic}", *common]
                       for i, mode in enumerate(consumers)]

    def start(self) -> Workload:
        self.stop_file.unlink(missing_ok=True)
        for spec in self.specs:
            history = self.root / f"history-{spec[2]}.jsonl"
            self.history_files.append(history)
            log = open(self.root / f"{spec[2]}.log", "ab")  # noqa: SIM115 - handed to the child
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "klog.testing.faults.workload", *spec, "--history", str(history)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            log.close()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        self.stop_file.touch()
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # e.g. a consumer's close() stuck on a broker: its history stands
                p.kill()
                p.wait(10)
                self.killed_at_stop.append(p.pid)

    def crashed(self) -> list[str]:
        """The workload processes that exited with an error (their log files' names): a run with a crashed
        producer or consumer proves nothing."""
        return [f"{spec[2]} (exit {p.returncode}, see {self.root / (spec[2] + '.log')})"
                for spec, p in zip(self.specs, self.procs) if p.returncode != 0 and p.pid not in self.killed_at_stop]

    def __enter__(self) -> Workload:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                 config: dict[str, str] | None = None, timeout: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor, config=config or {})],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout)


def final_read(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from the start to the high watermark at the time of the call, as a
    read_committed consumer reads them: a partition's end is reached at its last record or when the consumer is told
    it is at the end past the watermark (aborted records and transaction markers are never delivered)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"faults-final-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        starts = {p: 0 for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        position = dict(starts)
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read incomplete: at {position}, high watermarks {ends}")
            for m in consumer.consume(1000, 1.0):
                error, at_end = m.error(), m.offset()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and at_end is not None:
                        p = int(m.partition() or 0)
                        position[p] = max(position[p], int(at_end))
                    continue
                p, offset, value = _record(m)
                if offset < ends[p]:
                    out[p].append((offset, value))
                position[p] = max(position[p], offset + 1)
        return out
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("role", choices=["producer", "txn-producer", "consumer"])
    parser.add_argument("--process", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--history", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--max-seconds", type=float, default=3600)
    parser.add_argument("--rate", type=int, default=50)
    parser.add_argument("--client", choices=sorted({*PRODUCER_CLIENTS, *TXN_CLIENTS}), default="confluent")
    parser.add_argument("--java-classes", default="", help="TxnDriver's compiled classes (txn-producer, java)")
    parser.add_argument("--mode", choices=["assign", "subscribe"], default="assign")
    parser.add_argument("--group", default="faults")
    args = parser.parse_args(argv)
    {"producer": run_producer, "txn-producer": run_txn_producer, "consumer": run_consumer}[args.role](args)


if __name__ == "__main__":
    main()
