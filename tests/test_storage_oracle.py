"""Apache Kafka's own DumpLogSegments reads klog's log dirs: an oracle for the on-disk format.

klog writes partitions (several segments, small index interval, every compression codec,
CreateTime and LogAppendTime, after delete-records and a restart), then Kafka 4.x's
``DumpLogSegments --deep-iteration --print-data-log`` runs over every ``.log``, ``.index`` and
``.timeindex``. It must report no error and the same offsets, keys and values klog was given;
``--index-sanity-check`` must pass for every index; without it, DumpLogSegments cross-checks each
index entry against the log and would print "Mismatches" or "timestamp mismatch".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from klog._native import LogConfig, LogManager
from klog.records import encode_batch

pytestmark = pytest.mark.java

LIBS = Path(__file__).resolve().parent.parent / ".cache" / "kafka" / "libs"
DUMP_CLASSES = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")
RECORD_LINE = re.compile(r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) .*?(?: key: (\S*))? payload: (\S*)$")
ERROR_MARKERS = ("Mismatches", "mismatch", "out of order", "not found", "isvalid: false", "Exception", "rror")


def run_dump(files: list[str], *extra: str) -> str:
    if shutil.which("java") is None or not list(LIBS.glob("kafka-tools-*.jar")):
        pytest.skip("needs java and the Kafka jars: run tools/install-peers.sh")
    last = None
    for cls in DUMP_CLASSES:
        out = subprocess.run(
            ["java", "-cp", f"{LIBS}/*", cls, "--files", ",".join(files), *extra],
            capture_output=True, text=True, timeout=120,
        )
        if "Could not find or load main class" in out.stderr:
            last = out
            continue
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout + "\n" + "\n".join(l for l in out.stderr.splitlines() if "SLF4J" not in l)
    pytest.fail(f"no DumpLogSegments class in {LIBS}: {last.stderr if last else ''}")


def segment_files(part_dir: str) -> list[str]:
    names = sorted(os.listdir(part_dir))
    return [os.path.join(part_dir, n) for n in names if n.endswith((".log", ".index", ".timeindex"))]


def write_logs(root: str) -> tuple[LogManager, dict[str, list[tuple[int, str, str]]]]:
    """Write three partitions; return expected (offset, key, value) per partition dir."""
    cfg = LogConfig(segment_bytes=6_000, index_interval_bytes=300)
    m = LogManager([root], cfg)
    expected: dict[str, list[tuple[int, str, str]]] = {}

    plain = m.create("plain", 0)
    exp = []
    for i in range(120):
        recs = [{"key": b"key-%d-%d" % (i, j), "value": b"value-%d-%d" % (i, j), "timestamp": 1_700_000_000_000 + i * 100 + j}
                for j in range(1 + i % 4)]
        r = plain.append(encode_batch(recs), leader_epoch=1 + i // 60)
        exp += [(r.base_offset + j, rec["key"].decode(), rec["value"].decode()) for j, rec in enumerate(recs)]
    expected[plain.dir] = exp

    comp = m.create("compressed", 3)
    exp = []
    codecs = ["gzip", "snappy", "lz4", "zstd", "none"]
    for i in range(60):
        recs = [{"key": b"c%d" % j, "value": (b"%s-%d-" % (codecs[i % 5].encode(), i)) + b"x" * (j * 7), "timestamp": 1_700_000_000_000 + i}
                for j in range(5)]
        r = comp.append(encode_batch(recs, compression=codecs[i % 5]), leader_epoch=0)
        exp += [(r.base_offset + j, rec["key"].decode(), rec["value"].decode()) for j, rec in enumerate(recs)]
    expected[comp.dir] = exp

    lat = m.create("appendtime", 1, LogConfig(segment_bytes=6_000, index_interval_bytes=300, message_timestamp_type="LogAppendTime"))
    exp = []
    for i in range(80):
        recs = [{"key": None if j else b"k%d" % i, "value": b"v%d.%d" % (i, j), "timestamp": 5} for j in range(3)]
        r = lat.append(encode_batch(recs, compression="lz4" if i % 2 else "none"), leader_epoch=0, now_ms=1_700_000_000_000 + i)
        exp += [(r.base_offset + j, rec["key"].decode() if rec["key"] else "null", rec["value"].decode()) for j, rec in enumerate(recs)]
    expected[lat.dir] = exp
    return m, expected


def parse_records(out: str) -> list[tuple[int, str, str]]:
    got = []
    for line in out.splitlines():
        mm = RECORD_LINE.match(line)
        if mm:
            got.append((int(mm.group(1)), mm.group(4) or "null", mm.group(5)))
    return got


def check_dir(part_dir: str, expected: list[tuple[int, str, str]]) -> None:
    files = segment_files(part_dir)
    assert sum(f.endswith(".log") for f in files) >= 2, "want several segments"
    out = run_dump(files, "--deep-iteration", "--print-data-log")
    bad = [l for l in out.splitlines() if any(m in l for m in ERROR_MARKERS)]
    assert not bad, "\n".join(bad[:20])
    assert parse_records(out) == expected
    if part_dir.endswith("appendtime-1"):
        stamps = re.findall(r"^\| offset: (\d+) LogAppendTime: (\d+)", out, re.M)
        assert len(stamps) == len(expected)
        assert all(int(ts) == 1_700_000_000_000 + int(off) // 3 for off, ts in stamps)
    sanity = run_dump(files, "--index-sanity-check")
    n_indexes = sum(f.endswith((".index", ".timeindex")) for f in files)
    assert sanity.count("passed sanity check") + sanity.count(".index is empty.") == n_indexes, sanity[-2000:]


def test_dump_log_segments_reads_what_klog_wrote(tmp_path):
    m, expected = write_logs(str(tmp_path))
    m.close()
    for part_dir, exp in expected.items():
        check_dir(part_dir, exp)


def test_dump_log_segments_after_delete_records_truncation_and_restart(tmp_path):
    m, expected = write_logs(str(tmp_path))
    plain = m.get("plain", 0)
    plain.high_watermark = plain.log_end_offset
    new_start = plain.delete_records_before(plain.segment_base_offsets()[2] + 1)
    plain.truncate_to(plain.log_end_offset - 5)
    leo = plain.log_end_offset
    m.close()
    m2 = LogManager([str(tmp_path)], LogConfig(segment_bytes=6_000, index_interval_bytes=300))
    plain = m2.get("plain", 0)
    assert plain.log_start_offset == new_start and plain.log_end_offset == leo
    r = plain.append(encode_batch([{"key": b"after", "value": b"restart", "timestamp": 1_800_000_000_000}]), leader_epoch=9)
    m2.close()
    first_base = int(sorted(f for f in os.listdir(plain.dir) if f.endswith(".log"))[0][:20])
    exp = [e for e in expected[plain.dir] if first_base <= e[0] < leo] + [(r.base_offset, "after", "restart")]
    check_dir(plain.dir, exp)
    assert open(os.path.join(str(tmp_path), "log-start-offset-checkpoint")).read().count(f"plain 0 {new_start}\n") == 1
