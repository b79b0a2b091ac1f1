//! Opening a partition directory after a crash (recovery: segment scan, index and epoch-checkpoint load)
//! with an arbitrary `.log`, `.index` and `leader-epoch-checkpoint`: an error or a log that serves what it
//! kept, never a panic. Input: flags, u16 index length + index bytes, u16 checkpoint length + checkpoint
//! bytes, then the segment.
use std::fs;
use std::path::PathBuf;

use klog_core::storage::checkpoint::{read_epochs, read_offsets};
use klog_core::storage::config::{LogConfig, MIN_SEGMENT_INDEX_BYTES};
use klog_core::storage::partition_log::{OpenOptions, PartitionLog};

fn take<'a>(input: &mut &'a [u8]) -> &'a [u8] {
    if input.len() < 2 {
        return &[];
    }
    let n = (u16::from_be_bytes([input[0], input[1]]) as usize).min(input.len() - 2);
    let part = &input[2..2 + n];
    *input = &input[2 + n..];
    part
}

/// Where one process's recovery runs write their partition directory (removed by the caller when done).
pub fn scratch() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    base.join(format!("klog-fuzz-recover-{}", std::process::id()))
}

pub fn check(input: &[u8]) {
    let Some((&flags, mut rest)) = input.split_first() else { return };
    let index = take(&mut rest);
    let checkpoint = take(&mut rest);
    let mut segment = rest.to_vec();
    if flags & 1 == 0 {
        super::common::reseal_all(&mut segment);
    }
    let root = scratch();
    let _ = fs::remove_dir_all(&root);
    let dir = root.join("t-0");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("00000000000000000000.log"), &segment).unwrap();
    if flags & 2 != 0 {
        fs::write(dir.join("00000000000000000000.index"), index).unwrap();
    }
    if flags & 4 != 0 {
        fs::write(dir.join("leader-epoch-checkpoint"), checkpoint).unwrap();
        let _ = read_epochs(&dir.join("leader-epoch-checkpoint"));
    }
    let offsets = root.join("recovery-point-offset-checkpoint");
    fs::write(&offsets, checkpoint).unwrap();
    let _ = read_offsets(&offsets);
    // Small indexes: recovery allocates segment_index_bytes per index, which would dominate every run.
    let config = LogConfig { segment_index_bytes: MIN_SEGMENT_INDEX_BYTES.max(4096), index_interval_bytes: 64, ..LogConfig::default() };
    let opts = OpenOptions { clean_shutdown: flags & 8 != 0, ..Default::default() };
    if let Ok(log) = PartitionLog::open(&dir, "t", 0, config, opts) {
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        assert!(start <= end);
        for offset in [start, start + (end - start) / 2, end - 1, end] {
            let _ = log.read(offset, 1 << 20, None, true);
        }
        let _ = log.offset_for_timestamp(0);
        let _ = log.close();
    }
    // Recovery reports what it dropped through a process-wide queue the broker drains: drain it here too.
    drop(klog_core::storage::events::take_warnings());
}
