"""The clean-shutdown file's broker epoch (klog.broker.clean_shutdown) in real log dirs: the bytes Kafka's
CleanShutdownFileHandler writes, and every doubt read as an unclean start (-1), as LogManager's
readBrokerEpochFromCleanShutdownFiles does. A real broker's file is checked, next to Kafka's, by
tests/test_cluster_clean_restart.py."""

from __future__ import annotations

from pathlib import Path

from klog.broker.clean_shutdown import CLEAN_SHUTDOWN_FILE, NO_EPOCH, read_previous_broker_epoch, write_broker_epoch


def _dirs(tmp_path: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        (tmp_path / f"d{i}").mkdir()
        out.append(str(tmp_path / f"d{i}"))
    return out


def test_the_epoch_is_written_as_kafka_writes_it_into_every_dir_that_closed_cleanly(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 3)
    for d in dirs[:2]:
        (Path(d) / CLEAN_SHUTDOWN_FILE).touch()   # what the native log manager leaves after closing the logs
    write_broker_epoch(dirs, 4242)
    assert [(Path(d) / CLEAN_SHUTDOWN_FILE).read_bytes() for d in dirs[:2]] == [b'{"version":0,"brokerEpoch":4242}'] * 2
    assert not (Path(dirs[2]) / CLEAN_SHUTDOWN_FILE).exists(), "an offline dir stays without the file"
    assert read_previous_broker_epoch(dirs[:2]) == 4242
    assert read_previous_broker_epoch(dirs) == NO_EPOCH


def test_an_empty_or_unparsable_file_or_dirs_that_disagree_read_as_an_unclean_start(tmp_path: Path) -> None:
    a, b = _dirs(tmp_path, 2)
    (Path(a) / CLEAN_SHUTDOWN_FILE).touch()
    assert read_previous_broker_epoch([a]) == NO_EPOCH   # died between closing the logs and writing the epoch
    (Path(a) / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":"7"}')
    assert read_previous_broker_epoch([a]) == NO_EPOCH
    (Path(a) / CLEAN_SHUTDOWN_FILE).write_text("[7]")
    assert read_previous_broker_epoch([a]) == NO_EPOCH
    (Path(a) / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":7}')
    (Path(b) / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":8}')
    assert read_previous_broker_epoch([a]) == 7
    assert read_previous_broker_epoch([a, b]) == NO_EPOCH
