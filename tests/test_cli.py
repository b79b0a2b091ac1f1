"""The ``klog`` command-line tool, run as a subprocess against klog's broker and Apache Kafka 4.x.

Each test drives the real console script and checks its output against what klog's client (a separate,
real Kafka client) wrote or reads back: topics, produce/consume in every format, consumer groups and their
lag, offset resets, configs, cluster info, benchmarks. ``dump-log`` reads the klog broker's own files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import klog
from klog.client import ConfigResource, TopicPartition

#: Upper bound of one CLI run (a consume waits at most its --idle-timeout on top of start-up).
RUN_TIMEOUT_S = 90


def klog_command() -> list[str]:
    script = shutil.which("klog", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "klog.cli"]


def run(*args: str, stdin: str | bytes | None = None, bootstrap: str | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = klog_command() + list(args)
    if bootstrap is not None:
        cmd += ["--bootstrap-server", bootstrap]
    data = stdin.decode() if isinstance(stdin, bytes) else stdin
    proc = subprocess.run(cmd, input=data, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def new_topic_name() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def read_all(bootstrap: str, topic: str, count: int) -> list[klog.ConsumerRecord]:
    with klog.AdminClient(bootstrap) as admin:
        parts = [p.partition for p in admin.describe_topics([topic])[topic].partitions]
    with klog.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in parts])
        out: list[klog.ConsumerRecord] = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            out += c.poll(timeout=0.5)
    return out


def write(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]], partition: int | None = None
          ) -> None:
    with klog.Producer(bootstrap) as p:
        for key, value in records:
            p.send(topic, value=value, key=key, partition=partition)
        p.flush()


def test_topics_create_list_describe_grow_alter_delete(bootstrap: str) -> None:
    topic = new_topic_name()
    out = run("topics", "create", topic, "--partitions", "3", "--config", "retention.ms=3600000",
              bootstrap=bootstrap).stdout
    assert f"Created topic {topic}." in out
    assert topic in run("topics", "list", bootstrap=bootstrap).stdout.split()
    again = run("topics", "create", topic, "--partitions", "3", bootstrap=bootstrap, check=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr, again.stderr
    assert "exists" in run("topics", "create", topic, "--if-not-exists", bootstrap=bootstrap).stdout

    described = run("topics", "describe", topic, bootstrap=bootstrap).stdout
    assert f"topic {topic}:" in described and "3 partitions" in described
    assert "retention.ms=3600000" in described

    run("topics", "add-partitions", topic, "--partitions", "5", bootstrap=bootstrap)
    run("topics", "alter-config", topic, "--set", "retention.ms=7200000", "--set", "segment.bytes=1048576",
        bootstrap=bootstrap)
    with klog.AdminClient(bootstrap) as admin:
        assert len(admin.describe_topics([topic])[topic].partitions) == 5
        configs = admin.describe_configs([ConfigResource("topic", topic)])[ConfigResource("topic", topic)]
        assert configs["retention.ms"].value == "7200000"
        assert configs["segment.bytes"].value == "1048576"
    run("topics", "alter-config", topic, "--delete", "segment.bytes", bootstrap=bootstrap)
    assert "segment.bytes" not in run("topics", "describe", topic, bootstrap=bootstrap).stdout

    run("topics", "delete", topic, bootstrap=bootstrap)
    deadline = time.monotonic() + 30
    while topic in run("topics", "list", bootstrap=bootstrap).stdout.split() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic not in run("topics", "list", bootstrap=bootstrap).stdout.split()
    assert "does not exist" in run("topics", "delete", topic, "--if-exists", bootstrap=bootstrap).stdout


def test_produce_lines_with_keys_and_headers_from_a_file(bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic_name()
    run("topics", "create", topic, "--partitions", "3", bootstrap=bootstrap)
    lines = [f"k{i}|value {i} ünïcode" for i in range(200)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("produce", topic, str(source), "--key-separator", "|", "--header", "origin=cli",
                 "--compression", "lz4", bootstrap=bootstrap)
    assert "Produced 200 records" in result.stderr and "records/s" in result.stderr
    got = read_all(bootstrap, topic, 200)
    assert sorted((r.key.decode(), r.value.decode()) for r in got) == sorted(
        tuple(line.split("|", 1)) for line in lines)
    assert all(r.headers == [("origin", b"cli")] for r in got)
    # Keyed records land where Kafka's default partitioner puts them (the same key, the same partition).
    by_key = {r.key: r.partition for r in got}
    assert len(set(by_key.values())) > 1


def test_produce_json_lines_from_stdin(bootstrap: str) -> None:
    topic = new_topic_name()
    run("topics", "create", topic, "--partitions", "2", bootstrap=bootstrap)
    objs = [{"key": "a", "value": {"n": 1}, "headers": {"h": "1"}, "partition": 1},
            {"value": "plain"},
            {"key": "b", "value": None, "partition": 0}]
    run("produce", topic, "--format", "json", stdin="\n".join(json.dumps(o) for o in objs) + "\n",
        bootstrap=bootstrap)
    got = sorted(read_all(bootstrap, topic, 3), key=lambda r: (r.value is None, r.value or b""))
    assert [(r.key, r.value) for r in got] == [(None, b"plain"), (b"a", b'{"n":1}'), (b"b", None)]
    assert got[1].partition == 1 and got[1].headers == [("h", b"1")]
    assert got[2].partition == 0
    bad = run("produce", topic, "--format", "json", stdin='{"value": "x", "colour": 1}\n', bootstrap=bootstrap,
              check=False)
    assert bad.returncode == 1 and "stdin:1: unknown field 'colour'" in bad.stderr


def test_consume_formats_and_start_positions(bootstrap: str) -> None:
    topic = new_topic_name()
    run("topics", "create", topic, "--partitions", "1", bootstrap=bootstrap)
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
    write(bootstrap, topic, records[:5])
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    write(bootstrap, topic, records[5:])

    values = run("consume", topic, "--from-beginning", "--count", "10", bootstrap=bootstrap).stdout.splitlines()
    assert values == [v.decode() for _, v in records]
    kv = run("consume", topic, "--from", "beginning", "-n", "3", "-f", "key-value", "-K", "=",
             bootstrap=bootstrap).stdout.splitlines()
    assert kv == ["k0=v0", "k1=v1", "k2=v2"]
    one = run("consume", topic, "--from", "7", "-n", "1", "-f", "hex", bootstrap=bootstrap)
    assert one.stdout.strip() == f"{b'k7'.hex()}\t{b'v7'.hex()}"
    assert one.stderr.strip().endswith("Consumed 1 record.")
    last = run("consume", topic, "--from", "-2", "-n", "2", bootstrap=bootstrap).stdout.splitlines()
    assert last == ["v8", "v9"]
    since = run("consume", topic, "--from", f"@{middle_ms}", "-n", "5", bootstrap=bootstrap).stdout.splitlines()
    assert since == ["v5", "v6", "v7", "v8", "v9"]
    as_json = [json.loads(line) for line in run("consume", topic, "--from", "beginning", "-n", "2", "-f", "json",
                                                bootstrap=bootstrap).stdout.splitlines()]
    assert [(o["offset"], o["key"], o["value"], o["partition"], o["topic"]) for o in as_json] == [
        (0, "k0", "v0", 0, topic), (1, "k1", "v1", 0, topic)]
    idle = run("consume", topic, "--from", "end", "--idle-timeout", "1", bootstrap=bootstrap)
    assert idle.stdout == "" and "Consumed 0 records" in idle.stderr


def test_consume_one_partition_and_binary_json(bootstrap: str) -> None:
    topic = new_topic_name()
    run("topics", "create", topic, "--partitions", "2", bootstrap=bootstrap)
    write(bootstrap, topic, [(None, b"p0")], partition=0)
    write(bootstrap, topic, [(None, b"\xff\x00binary")], partition=1)
    out = run("consume", topic, "--partition", "1", "--from-beginning", "-n", "1", "-f", "json",
              bootstrap=bootstrap).stdout
    obj = json.loads(out)
    assert obj["partition"] == 1 and obj["value"] == {"base64": "/wBiaW5hcnk="}


def test_groups_lag_reset_delete(bootstrap: str) -> None:
    topic = new_topic_name()
    group = f"g-{uuid.uuid4().hex[:8]}"
    run("topics", "create", topic, "--partitions", "2", bootstrap=bootstrap)
    write(bootstrap, topic, [(f"k{i}".encode(), b"x") for i in range(20)])
    consumed = run("consume", topic, "--group", group, "--from-beginning", "-n", "20", bootstrap=bootstrap)
    assert len(consumed.stdout.splitlines()) == 20
    with klog.AdminClient(bootstrap) as admin:
        ends = {tp: o.offset for tp, o in admin.list_offsets({(topic, 0): "latest", (topic, 1): "latest"}).items()}
        deadline = time.monotonic() + 30
        while admin.list_group_offsets(group) != {} and time.monotonic() < deadline:
            if {tp: o.offset for tp, o in admin.list_group_offsets(group).items()} == ends:
                break
            time.sleep(0.2)
    assert group in run("groups", "list", bootstrap=bootstrap).stdout
    lag = run("groups", "lag", group, bootstrap=bootstrap).stdout
    assert "total lag: 0" in lag
    for tp, end in ends.items():
        assert any(line.split()[1:5:] == [str(tp.partition), str(end), str(end), "0"]
                   for line in (row.replace("│", " ") for row in lag.splitlines()) if topic in line), lag

    plan = run("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", bootstrap=bootstrap).stdout
    assert "dry run" in plan
    assert "total lag: 0" in run("groups", "lag", group, bootstrap=bootstrap).stdout
    run("groups", "reset-offsets", group, "--topic", f"{topic}:0", "--to-offset", "1", "--execute",
        bootstrap=bootstrap)
    run("groups", "reset-offsets", group, "--topic", f"{topic}:1", "--to-earliest", "--execute",
        bootstrap=bootstrap)
    with klog.AdminClient(bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert committed[TopicPartition(topic, 0)].offset == min(1, ends[TopicPartition(topic, 0)])
    assert committed[TopicPartition(topic, 1)].offset == 0
    expected_lag = sum(ends.values()) - committed[TopicPartition(topic, 0)].offset
    assert f"total lag: {expected_lag}" in run("groups", "lag", group, bootstrap=bootstrap).stdout

    shifted = run("groups", "reset-offsets", group, "--topic", f"{topic}:1", "--shift-by", "3", "--execute",
                  bootstrap=bootstrap)
    assert shifted.returncode == 0
    with klog.AdminClient(bootstrap) as admin:
        assert admin.list_group_offsets(group)[TopicPartition(topic, 1)].offset == min(3, ends[TopicPartition(topic, 1)])

    run("groups", "delete-offsets", group, "--topic", f"{topic}:1", bootstrap=bootstrap)
    with klog.AdminClient(bootstrap) as admin:
        assert TopicPartition(topic, 1) not in admin.list_group_offsets(group)
    assert f"Deleted group {group}." in run("groups", "delete", group, bootstrap=bootstrap).stdout
    assert group not in run("groups", "list", bootstrap=bootstrap).stdout


def _table_rows(out: str, topic: str) -> list[list[str]]:
    return [row.replace("│", " ").split() for row in out.splitlines() if topic in row]


def test_groups_describe_shows_offsets_lag_and_owner_per_partition(bootstrap: str) -> None:
    """As kafka-consumer-groups --describe: per partition the committed offset, log end, lag and the member that
    owns it; a partition without a commit shows "-"; once the group is empty its commits still show."""
    topic = new_topic_name()
    group = f"g-{uuid.uuid4().hex[:8]}"
    run("topics", "create", topic, "--partitions", "2", bootstrap=bootstrap)
    write(bootstrap, topic, [(None, b"x")] * 5, partition=0)
    write(bootstrap, topic, [(None, b"y")] * 3, partition=1)
    with klog.Consumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="cli-test-member",
                       enable_auto_commit=False) as c:
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(timeout=0.2)
        c.commit({(topic, 0): 2})
        with klog.AdminClient(bootstrap) as admin:
            member = admin.describe_groups([group])[group].members[0]
        owner = [member.member_id, member.client_host, "cli-test-member"]
        table = run("groups", "describe", group, bootstrap=bootstrap).stdout
        assert _table_rows(table, topic) == [[topic, "0", "2", "5", "3", *owner], [topic, "1", "-", "3", "-", *owner]]
        assert "state Stable, 1 members" in table and "total lag: 3" in table
        as_json = json.loads(run("groups", "describe", group, "--format", "json", bootstrap=bootstrap).stdout)
        owned = {"consumer_id": member.member_id, "host": member.client_host, "client_id": "cli-test-member"}
        assert as_json == {"group": group, "state": "Stable", "total_lag": 3, "partitions": [
            {"topic": topic, "partition": 0, "current_offset": 2, "log_end_offset": 5, "lag": 3, **owned},
            {"topic": topic, "partition": 1, "current_offset": None, "log_end_offset": 3, "lag": None, **owned}]}
        members = run("groups", "describe", group, "--members", bootstrap=bootstrap).stdout
        assert "state Stable" in members and "1 members" in members and "cli-test-member" in members
        assert f"{topic}-0, {topic}-1" in members
        members_json = json.loads(run("groups", "describe", group, "--members", "-f", "json",
                                      bootstrap=bootstrap).stdout)
        assert [m["assignment"] for m in members_json["members"]] == [[[topic, 0], [topic, 1]]]
    empty = run("groups", "describe", group, bootstrap=bootstrap).stdout
    assert "state Empty, 0 members" in empty
    assert _table_rows(empty, topic) == [[topic, "0", "2", "5", "3", "-", "-", "-"]]
    assert _table_rows(run("groups", "lag", group, bootstrap=bootstrap).stdout, topic) == _table_rows(empty, topic)


def test_errors_are_one_clear_line(bootstrap: str, tmp_path: Path) -> None:
    missing = run("consume", "no-such-topic-xyz", "--from-beginning", "-n", "1", bootstrap=bootstrap, check=False)
    assert missing.returncode == 1
    assert missing.stderr.startswith("klog: error:") and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    assert "Traceback" not in missing.stderr
    for command in ("lag", "describe"):
        no_group = run("groups", command, "no-such-group-xyz", bootstrap=bootstrap, check=False)
        assert (no_group.returncode, no_group.stderr) == (
            1, "klog: error: consumer group 'no-such-group-xyz' does not exist\n")
    props = tmp_path / "client.properties"
    props.write_text("client.id=cli-test\nrequest.timout.ms=1000\n")
    typo = run("topics", "list", "--command-config", str(props), bootstrap=bootstrap, check=False)
    assert typo.returncode == 1 and "unknown client config 'request.timout.ms'" in typo.stderr
    assert "did you mean 'request.timeout.ms'" in typo.stderr
    props.write_text("client.id=cli-test\nrequest.timeout.ms=10000\n")
    assert run("topics", "list", "--command-config", str(props), bootstrap=bootstrap).returncode == 0


def test_dump_log_prints_what_the_broker_stored(klog_broker: klog.Broker) -> None:
    bootstrap = klog_broker.bootstrap_servers
    topic = new_topic_name()
    run("topics", "create", topic, "--partitions", "1", bootstrap=bootstrap)
    records = [(f"key{i}".encode(), f"value {i}".encode()) for i in range(30)]
    write(bootstrap, topic, records)
    partition_dir = Path(klog_broker.data_dir) / f"{topic}-0"
    segment = partition_dir / f"{0:020d}.log"
    deadline = time.monotonic() + 10
    while segment.stat().st_size == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    out = run("dump-log", str(segment)).stdout.splitlines()
    assert out[0] == f"Dumping {segment}" and out[1] == "Log starting offset: 0"
    data = [line for line in out if line.startswith("| offset:")]
    assert [(line.split(" key: ")[1].split(" payload: ")[0], line.split(" payload: ")[1]) for line in data] == [
        (k.decode(), v.decode()) for k, v in records]
    batches = [line for line in out if line.startswith("baseOffset:")]
    assert batches and sum(int(b.split(" count: ")[1].split()[0]) for b in batches) == 30
    no_data = run("dump-log", "--no-data", str(segment)).stdout
    assert "payload" not in no_data and "keySize: 4" in no_data
    everything = run("dump-log", str(partition_dir)).stdout
    assert f"{0:020d}.index" in everything and f"{0:020d}.timeindex" in everything
    bogus = partition_dir.parent / "not-a-log.txt"
    bogus.write_text("x")
    refused = run("dump-log", str(bogus), check=False)
    assert refused.returncode == 1 and "not a file dump-log reads" in refused.stderr


def test_dump_log_checkpoints_and_metadata_frames(tmp_path: Path) -> None:
    from klog.records import encode_batch

    checkpoint = tmp_path / "log-start-offset-checkpoint"
    checkpoint.write_text("0\n2\norders 0 5\norders 1 7\n")
    out = run("dump-log", str(checkpoint)).stdout.splitlines()
    assert out[1:] == ["topic: orders partition: 0 offset: 5", "topic: orders partition: 1 offset: 7"]
    epochs = tmp_path / "leader-epoch-checkpoint"
    epochs.write_text("0\n2\n0 0\n3 120\n")
    assert run("dump-log", str(epochs)).stdout.splitlines()[1:] == ["epoch: 0 startOffset: 0",
                                                                    "epoch: 3 startOffset: 120"]
    # not a metadata record frame in the metadata log: said so on its line, the rest still printed
    meta_dir = tmp_path / "__cluster_metadata-0"
    meta_dir.mkdir()
    (meta_dir / f"{0:020d}.log").write_bytes(encode_batch([{"key": None, "value": b"\x07\x02\x00body",
                                                            "timestamp": 1}], base_offset=0))
    dumped = run("dump-log", str(meta_dir / f"{0:020d}.log")).stdout
    assert "(not a metadata record: offset 0:" in dumped and "baseOffset: 0 lastOffset: 0" in dumped
    # Batch attributes as Kafka's tool names them: compression codec and LogAppendTime.
    topic_dir = tmp_path / "orders-0"
    topic_dir.mkdir()
    batch = encode_batch([{"key": b"k", "value": b"v" * 100, "timestamp": 7}], base_offset=0, compression="lz4",
                         timestamp_type="log_append")
    (topic_dir / f"{0:020d}.log").write_bytes(batch + batch[:30])  # and a partial batch after it
    dumped = run("dump-log", str(topic_dir / f"{0:020d}.log")).stdout
    assert "compresscodec: lz4" in dumped and "LogAppendTime: 7" in dumped
    assert "| offset: 0 LogAppendTime: 7 keySize: 1 valueSize: 100" in dumped
    assert "Found 30 trailing bytes" in dumped


def test_help_and_shell_completion() -> None:
    top = run("--help").stdout
    for command in ("topics", "produce", "consume", "groups", "configs", "cluster", "dump-log", "bench", "console"):
        assert command in top
    assert "--install-completion" in top
    completion = run(env={"_KLOG_COMPLETE": "complete_bash", "COMP_WORDS": "klog groups re", "COMP_CWORD": "2"})
    assert completion.stdout.split() == ["reset-offsets"]
    assert run("--version").stdout.strip() == f"klog {klog.__version__}"


README = Path(__file__).resolve().parent.parent / "README.md"


def _readme_cli_lines() -> list[str]:
    """The ``klog`` lines of the README's "Running the broker and the CLI" block, comments cut."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Running the broker and the CLI"):]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start:section.index("\n```", start)]
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line.startswith(("klog ", "printf "))]


def test_the_readme_commands_create_move_watch_lag_and_serve_the_console(klog_broker: klog.Broker) -> None:
    """A new user's walk: the README's own commands, run by bash as written (with this broker's address for
    127.0.0.1:9092), create a topic, move a record through it, show the group's lag and serve the console."""
    if not README.exists():
        pytest.skip("README.md is not shipped with an installed wheel's tests")  # pragma: no cover
    bootstrap = klog_broker.bootstrap_servers
    lines = _readme_cli_lines()
    console_lines = [line for line in lines if line.startswith("klog console")]
    assert console_lines, "the README does not show how to open the web console"
    env = {**os.environ, "KLOG_BOOTSTRAP_SERVER": bootstrap,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    # `klog` as the README calls it: the console script, else the module (a source tree without the script)
    prelude = "" if shutil.which("klog", path=os.path.dirname(sys.executable)) else \
        f'klog() {{ "{sys.executable}" -m klog.cli "$@"; }}\n'
    outputs = {}
    for line in lines:
        if line in console_lines:
            continue
        command = line.replace("127.0.0.1:9092", bootstrap)
        done = subprocess.run(["bash", "-c", prelude + command], capture_output=True, text=True, env=env,
                              timeout=RUN_TIMEOUT_S)
        assert done.returncode == 0, f"README: {line}\n{done.stdout}\n{done.stderr}"
        outputs[line] = done.stdout
    topics = run("topics", "describe", "orders", bootstrap=bootstrap).stdout
    assert "6 partitions" in topics
    consumed = [json.loads(out) for line, out in outputs.items() if line.startswith("klog consume")]
    assert consumed and consumed[0]["key"] == "c1" and consumed[0]["value"] == "42"
    lag = next(out for line, out in outputs.items() if line.startswith("klog groups lag"))
    assert "billing" in lag and "total lag: 0" in lag

    # the console, as the README starts it, on a free port instead of 8080
    console = subprocess.Popen(["bash", "-c", prelude + "exec " + console_lines[0] + " --port 0"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert console.stderr is not None
        started = console.stderr.readline()
        match = re.search(r"on (http://\S+) \(Ctrl-C", started)
        assert match, started + console.stderr.read() if console.poll() is not None else started
        with urllib.request.urlopen(match.group(1) + "/groups/billing", timeout=30) as page:
            html = page.read().decode()
        assert "billing" in html and "orders" in html
    finally:
        console.terminate()
        assert console.wait(30) == 0


def _kafka_dump(path: Path) -> str:
    from klog.testing import kafka_tools

    result = kafka_tools.run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration",
                                        "--print-data-log", "--files", str(path),
                                        libs=kafka_tools.kafka_libs_dir(__file__))
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.java
def test_dump_log_prints_what_kafkas_dump_log_segments_prints(tmp_path: Path) -> None:
    """The same segment, offset index and time index files, dumped by Kafka's own tool and by klog's: the same
    text, line for line (batches, records with keys, null values and headers, compressed batches)."""
    from klog.testing.process import BrokerProcess

    topic = "dumped"
    with BrokerProcess(tmp_path / "data", {"log.index.interval.bytes": 256}) as broker:
        run("topics", "create", topic, "--partitions", "1", bootstrap=broker.bootstrap_servers)
        with klog.Producer(broker.bootstrap_servers, linger_ms=0) as p:
            for i in range(300):
                p.send(topic, value=None if i % 50 == 7 else f"value-{i}".encode() * (i % 5 + 1),
                       key=None if i % 3 else f"k{i}".encode(), headers=[("h", b"x")] if i % 7 == 0 else None)
                if i % 20 == 0:
                    p.flush()
        with klog.Producer(broker.bootstrap_servers, compression_type="gzip") as p:
            for i in range(50):
                p.send(topic, f"zipped-{i}".encode())
    # Stopped cleanly: the active segment's indexes are trimmed to their entries, as Kafka leaves them.
    segment_dir = tmp_path / "data" / f"{topic}-0"
    for name in (f"{0:020d}.log", f"{0:020d}.index", f"{0:020d}.timeindex"):
        ours = run("dump-log", str(segment_dir / name)).stdout
        assert ours == _kafka_dump(segment_dir / name), name
        assert len(ours.splitlines()) > 10


@pytest.mark.java
def test_dump_log_reads_apache_kafkas_own_segments(apache_kafka_bootstrap: str,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    topic = new_topic_name()
    run("topics", "create", topic, "--partitions", "1", bootstrap=apache_kafka_bootstrap)
    write(apache_kafka_bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)])
    found = sorted(tmp_path_factory.getbasetemp().glob(f"apache-kafka[0-9]*/kafka-data/{topic}-0/{0:020d}.log"))
    assert len(found) == 1, found
    segment = found[0]
    ours = run("dump-log", str(segment)).stdout
    assert ours == _kafka_dump(segment)
    assert sum(line.startswith("| offset:") for line in ours.splitlines()) == 40
