//! Tests of the cleaner on real partition logs in temporary directories.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::batch::header::{BatchHeader, Compression};
use crate::batch::records::{open_batch, BatchWriter, DecodeOptions, EncodeOptions};
use crate::storage::config::LogConfig;
use crate::storage::partition_log::OpenOptions as LogOpenOptions;
use crate::storage::test_dir::TempDir;


fn compacted(segment_bytes: i64) -> LogConfig {
    LogConfig { compact: true, delete: false, segment_bytes, file_delete_delay_ms: 0, index_interval_bytes: 100, ..Default::default() }
}

fn open(dir: &Path, cfg: LogConfig, clean: bool) -> PartitionLog {
    PartitionLog::open(dir, "t", 0, cfg, LogOpenOptions { clean_shutdown: clean, ..Default::default() }).unwrap()
}

/// One batch of (key, value) records.
fn batch(records: &[(&str, Option<&str>)], ts: i64, opts: EncodeOptions) -> Vec<u8> {
    let mut w = BatchWriter::new(opts);
    for (k, v) in records {
        w.append::<&[u8], &[u8]>(ts, Some(k.as_bytes()), v.map(str::as_bytes), &[]).unwrap();
    }
    w.finish().unwrap()
}

/// Every record of the log: (offset, key, value), and every batch header.
fn read_all(log: &PartitionLog) -> (Vec<(i64, String, Option<String>)>, Vec<BatchHeader>) {
    let mut out = Vec::new();
    let mut headers = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, u64::MAX, None, true).unwrap();
        let Some(range) = r.range else { break };
        let mut buf = vec![0u8; range.length as usize];
        crate::storage::fileio::pread_exact(&range.file, &mut buf, range.position).unwrap();
        let mut pos = 0;
        while pos < buf.len() {
            let h = BatchHeader::parse(&buf[pos..], pos).unwrap();
            let view = open_batch(&buf[pos..pos + h.size()], pos, &DecodeOptions::fetch()).unwrap();
            for rec in view.records() {
                let rec = rec.unwrap();
                out.push((
                    h.base_offset + rec.offset_delta as i64,
                    String::from_utf8(rec.key.unwrap().to_vec()).unwrap(),
                    rec.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
                ));
            }
            headers.push(h);
            offset = h.next_offset();
            pos += h.size();
        }
    }
    (out, headers)
}

fn latest(records: &[(i64, String, Option<String>)]) -> BTreeMap<String, Option<String>> {
    records.iter().map(|(_, k, v)| (k.clone(), v.clone())).collect()
}

/// Append `rounds` rounds over `keys` keys (one batch of `per_batch` records each), rolling
/// often; returns the expected latest value per key.
fn fill(log: &PartitionLog, keys: usize, rounds: usize, per_batch: usize, opts: EncodeOptions) -> BTreeMap<String, Option<String>> {
    let mut expect = BTreeMap::new();
    let mut pending: Vec<(String, String)> = Vec::new();
    for round in 0..rounds {
        for k in 0..keys {
            let (key, value) = (format!("key-{k}"), format!("value-{k}-{round}"));
            expect.insert(key.clone(), Some(value.clone()));
            pending.push((key, value));
            if pending.len() == per_batch {
                let recs: Vec<(&str, Option<&str>)> = pending.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect();
                log.append(&batch(&recs, 1_000 + round as i64, opts), 0, 0).unwrap();
                pending.clear();
            }
        }
    }
    if !pending.is_empty() {
        let recs: Vec<(&str, Option<&str>)> = pending.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect();
        log.append(&batch(&recs, 1_000, opts), 0, 0).unwrap();
    }
    seal(&log);
    expect
}

/// Roll, and let everything appended be replicated (the high watermark at the log end).
fn seal(log: &PartitionLog) {
    log.roll().unwrap();
    log.set_high_watermark(log.log_end_offset());
}

fn clean_once(log: &PartitionLog, checkpoint: Option<i64>, now: i64, cfg: &CleanerConfig) -> (Plan, Option<(i64, CleanStats)>) {
    let view = log.cleaner_view().unwrap();
    let p = plan(log, &view, checkpoint, now).unwrap();
    let r = clean_log(log, &p, cfg, cfg.map_bytes_per_thread(), now, &IoThrottle::new(cfg.io_max_bytes_per_second), &AtomicBool::new(false)).unwrap();
    (p, r)
}

#[test]
fn cleaning_keeps_exactly_the_latest_value_of_each_key_at_its_original_offset() {
    let d = TempDir::new("cleaner-latest");
    let log = open(&d.0, compacted(4096), true);
    let expect = fill(&log, 50, 6, 7, EncodeOptions::default());
    let (before, _) = read_all(&log);
    let leo = log.log_end_offset();
    let (p, r) = clean_once(&log, None, 10_000, &CleanerConfig::default());
    assert!(p.dirty_ratio > 0.99 && p.first_dirty == 0, "{p:?}");
    let (end, stats) = r.unwrap();
    assert_eq!(end, leo, "everything below the (empty) active segment is cleaned");
    let (after, headers) = read_all(&log);
    assert_eq!(after.len(), 50, "one record per key");
    assert_eq!(latest(&after), expect);
    // Offsets are the original ones: each surviving record is the last occurrence of its key.
    let last_offset: BTreeMap<String, i64> = before.iter().map(|(o, k, _)| (k.clone(), *o)).collect();
    for (o, k, _) in &after {
        assert_eq!(last_offset[k], *o, "{k}");
    }
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0), "offsets increase");
    assert!(headers.iter().all(|h| h.records_count as i64 <= h.last_offset_delta as i64 + 1));
    assert!(stats.bytes_written < stats.bytes_read / 3, "{stats:?}");
    assert_eq!(log.log_end_offset(), leo);
    // Reopened after a crash (full recovery of every segment), the log reads the same.
    drop(log);
    let log = open(&d.0, compacted(4096), false);
    assert_eq!(read_all(&log).0, after);
}

#[test]
fn compressed_batches_stay_compressed_with_their_codec_and_producer_fields() {
    let d = TempDir::new("cleaner-codec");
    let log = open(&d.0, compacted(1 << 20), true);
    let opts = EncodeOptions { compression: Compression::Zstd, producer_id: 7, producer_epoch: 2, base_sequence: 0, ..Default::default() };
    log.append(&batch(&[("a", Some("1")), ("b", Some("1")), ("c", Some("1"))], 100, opts), 0, 0).unwrap();
    log.append(&batch(&[("a", Some("2"))], 200, EncodeOptions { base_sequence: 3, ..opts }), 0, 0).unwrap();
    seal(&log);
    clean_once(&log, None, 1_000, &CleanerConfig::default()).1.unwrap();
    let (recs, headers) = read_all(&log);
    assert_eq!(recs, vec![(1, "b".into(), Some("1".into())), (2, "c".into(), Some("1".into())), (3, "a".into(), Some("2".into()))]);
    let h = headers[0];
    assert_eq!((h.base_offset, h.last_offset_delta, h.records_count), (0, 2, 2), "last offset delta kept");
    assert_eq!(h.compression(0).unwrap(), Compression::Zstd);
    assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 2, 0));
    assert_eq!(h.max_timestamp, 100);
    assert_eq!(headers[1].base_sequence, 3);
}

#[test]
fn tombstones_get_a_delete_horizon_and_go_once_it_passed() {
    let d = TempDir::new("cleaner-tombstones");
    let mut cfg = compacted(1 << 20);
    cfg.delete_retention_ms = 1_000;
    let log = open(&d.0, cfg, true);
    log.append(&batch(&[("a", Some("1")), ("b", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    log.append(&batch(&[("a", None), ("c", Some("1"))], 200, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let (_, r) = clean_once(&log, None, 5_000, &CleanerConfig::default());
    let (end, _) = r.unwrap();
    let (recs, headers) = read_all(&log);
    assert_eq!(recs, vec![(1, "b".into(), Some("1".into())), (2, "a".into(), None), (3, "c".into(), Some("1".into()))]);
    let tomb = headers.iter().find(|h| h.base_offset == 2).unwrap();
    assert_eq!(tomb.delete_horizon(), Some(6_000), "now + delete.retention.ms");
    // The record keeps its timestamp after the re-basing.
    let r = log.read(2, u64::MAX, None, true).unwrap().range.unwrap();
    let mut buf = vec![0u8; r.length as usize];
    crate::storage::fileio::pread_exact(&r.file, &mut buf, r.position).unwrap();
    let h = BatchHeader::parse(&buf, 0).unwrap();
    let view = open_batch(&buf[..h.size()], 0, &DecodeOptions::fetch()).unwrap();
    let first = view.records().next().unwrap().unwrap();
    assert_eq!(view.record_timestamp(first.timestamp_delta), 200);
    // Before the horizon a second pass keeps it; after, it is gone.
    log.append(&batch(&[("d", Some("1"))], 300, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let (_, r) = clean_once(&log, Some(end), 5_500, &CleanerConfig::default());
    let (end, _) = r.unwrap();
    assert!(read_all(&log).0.iter().any(|(_, k, v)| k == "a" && v.is_none()));
    log.append(&batch(&[("e", Some("1"))], 400, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    clean_once(&log, Some(end), 6_000, &CleanerConfig::default()).1.unwrap();
    let keys: Vec<String> = read_all(&log).0.into_iter().map(|(_, k, _)| k).collect();
    assert_eq!(keys, vec!["b", "c", "d", "e"]);
}

#[test]
fn a_key_map_too_small_for_the_dirty_keys_cleans_up_to_where_they_fit() {
    let d = TempDir::new("cleaner-small-map");
    let log = open(&d.0, compacted(2048), true);
    let expect = fill(&log, 200, 3, 10, EncodeOptions::default());
    let leo = log.log_end_offset();
    // 64 slots * 0.5 = 32 keys per pass.
    let cfg = CleanerConfig { dedupe_buffer_size: 64 * offset_map::SLOT_BYTES as u64, dedupe_buffer_load_factor: 0.5, ..Default::default() };
    let (_, r) = clean_once(&log, None, 10_000, &cfg);
    let (end, stats) = r.unwrap();
    assert!(end < leo && end >= 32, "stopped early at {end}");
    assert!(stats.peak_map_bytes <= 64 * offset_map::SLOT_BYTES as u64);
    assert_eq!(latest(&read_all(&log).0), expect, "nothing lost");
    let mut checkpoint = end;
    for _ in 0..100 {
        if checkpoint >= leo {
            break;
        }
        let (_, r) = clean_once(&log, Some(checkpoint), 10_000, &cfg);
        checkpoint = r.unwrap().0;
    }
    assert_eq!(checkpoint, leo);
    let (recs, _) = read_all(&log);
    assert_eq!(latest(&recs), expect);
    assert_eq!(recs.len(), 200);
}

#[test]
fn an_idempotent_producers_last_batch_stays_as_an_empty_header() {
    let d = TempDir::new("cleaner-producer");
    let log = open(&d.0, compacted(1 << 20), true);
    let p = EncodeOptions { producer_id: 42, producer_epoch: 0, base_sequence: 0, ..Default::default() };
    log.append(&batch(&[("a", Some("1"))], 100, p), 0, 0).unwrap();
    log.append(&batch(&[("b", Some("1"))], 100, EncodeOptions { base_sequence: 1, ..p }), 0, 0).unwrap();
    log.append(&batch(&[("a", Some("2")), ("b", Some("2"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    log.append(&batch(&[("c", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    clean_once(&log, None, 1_000, &CleanerConfig::default()).1.unwrap();
    let (_, headers) = read_all(&log);
    let summary: Vec<(i64, i64, i32, i32)> = headers.iter().map(|h| (h.base_offset, h.producer_id, h.base_sequence, h.records_count)).collect();
    // The first batch of producer 42 goes; its last one stays empty (sequence 1 kept).
    assert_eq!(summary, vec![(1, 42, 1, 0), (2, -1, -1, 2), (4, -1, -1, 1)]);
    // Once the producer expired, the empty batch goes too.
    let cfg = CleanerConfig { producer_id_expiration_ms: 500, ..Default::default() };
    log.append(&batch(&[("d", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    clean_once(&log, None, 1_000, &cfg).1.unwrap();
    assert!(read_all(&log).1.iter().all(|h| h.producer_id == -1));
}

#[test]
fn a_batch_emptied_at_the_end_of_its_segment_does_not_hold_the_largest_timestamp() {
    let d = TempDir::new("cleaner-max-timestamp");
    // segments of one batch each, too large to be cleaned into one
    let log = open(&d.0, compacted(100), true);
    // the largest timestamp is x's first value; x's later value is older
    for (records, ts) in [(&[("x", Some("1"))], 900), (&[("x", Some("2"))], 100), (&[("y", Some("1"))], 50)] {
        log.append(&batch(records, ts, EncodeOptions::default()), 0, 0).unwrap();
        seal(&log);
    }
    assert_eq!(log.max_timestamp_offset().unwrap(), (0, 900));
    clean_once(&log, None, 1_000, &CleanerConfig::default()).1.unwrap();
    let (records, headers) = read_all(&log);
    assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!((headers[0].base_offset, headers[0].records_count), (0, 0), "kept as an empty header");
    assert_eq!(log.max_timestamp_offset().unwrap(), (1, 100));
}

/// Clean with the swap stopped after `steps` steps (a crash there), then reopen without a clean
/// shutdown: the log is valid and every key's latest value is there.
fn crash_during_swap(steps: u8, write_cleaned_only: bool) {
    let d = TempDir::new(&format!("cleaner-crash-{steps}-{write_cleaned_only}"));
    let cfg = compacted(2048);
    let log = open(&d.0, cfg, true);
    let expect = fill(&log, 40, 5, 6, EncodeOptions::default());
    let view = log.cleaner_view().unwrap();
    let bases: Vec<i64> = view.segments.iter().map(|s| s.base).collect();
    assert!(bases.len() > 3);
    // Clean normally into a scratch copy to get real cleaned files for the first group.
    let scratch = TempDir::new(&format!("cleaner-crash-src-{steps}-{write_cleaned_only}"));
    for e in fs::read_dir(&d.0).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), scratch.0.join(e.file_name())).unwrap();
    }
    let copy = open(&scratch.0, cfg, true);
    clean_once(&copy, None, 10_000, &CleanerConfig::default()).1.unwrap();
    drop(copy);
    // The first cleaned segment of the copy replaces the first segments of `log`.
    let cleaned_bases: Vec<i64> = {
        let mut v: Vec<i64> = fs::read_dir(&scratch.0)
            .unwrap()
            .filter_map(|e| crate::storage::segment::parse_segment_file_name(e.unwrap().file_name().to_str().unwrap(), LOG_SUFFIX))
            .collect();
        v.sort();
        v
    };
    let (first, next) = (cleaned_bases[0], cleaned_bases[1]);
    for s in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        fs::copy(scratch.0.join(crate::storage::segment::segment_file_name(first, s)), suffixed(&d.0, first, s, CLEANED_SUFFIX)).unwrap();
    }
    let group: Vec<i64> = bases.iter().copied().filter(|b| *b >= first && *b < next).collect();
    if !write_cleaned_only {
        assert_eq!(log.swap_in_cleaned_until(&[group.clone()], view.generation, steps).unwrap().is_some(), steps == 3);
    }
    std::mem::forget(log); // a crash: nothing is closed or flushed
    let log = open(&d.0, cfg, false);
    let (recs, _) = read_all(&log);
    assert_eq!(latest(&recs), expect, "steps {steps}");
    assert!(recs.windows(2).all(|w| w[0].0 < w[1].0));
    let leftovers: Vec<String> = fs::read_dir(&d.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let segs = log.segment_bases().unwrap();
    if steps >= 1 && !write_cleaned_only {
        // Committed: the group is one segment now.
        assert!(segs.contains(&first) && !group[1..].iter().any(|b| segs.contains(b)), "{segs:?} {group:?}");
    } else {
        assert!(group.iter().all(|b| segs.contains(b)), "rolled back: {segs:?}");
    }
    // And the log cleans to the end afterwards.
    clean_once(&log, None, 10_000, &CleanerConfig::default()).1.unwrap();
    let (recs, _) = read_all(&log);
    assert_eq!((latest(&recs), recs.len()), (expect.clone(), expect.len()));
}

#[test]
fn a_crash_with_only_cleaned_files_is_rolled_back() {
    crash_during_swap(0, true);
}

#[test]
fn a_crash_after_the_swap_files_are_committed_is_completed() {
    crash_during_swap(1, false);
}

#[test]
fn a_crash_after_the_old_segments_were_retired_is_completed() {
    crash_during_swap(2, false);
}

#[test]
fn a_finished_swap_survives_a_crash() {
    crash_during_swap(3, false);
}

#[test]
fn a_crash_midway_through_committing_several_groups_is_rolled_back() {
    let d = TempDir::new("cleaner-crash-two-groups");
    let cfg = compacted(2048);
    let log = open(&d.0, cfg, true);
    let expect = fill(&log, 40, 5, 6, EncodeOptions::default());
    let bases = log.segment_bases().unwrap();
    drop(log);
    // Group 2 (the higher one) renamed to .swap first, group 1 still .cleaned: neither committed.
    let (b1, b2) = (bases[0], bases[2]);
    for s in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        fs::write(suffixed(&d.0, b1, s, CLEANED_SUFFIX), b"garbage").unwrap();
        fs::write(suffixed(&d.0, b2, s, swap::SWAP_SUFFIX), b"garbage").unwrap();
    }
    let log = open(&d.0, cfg, false);
    assert_eq!(latest(&read_all(&log).0), expect);
    assert_eq!(log.segment_bases().unwrap(), bases, "rolled back: every old segment is there");
}

#[test]
fn a_crash_between_the_index_and_log_renames_is_rolled_back() {
    let d = TempDir::new("cleaner-crash-partial-rename");
    let cfg = compacted(4096);
    let log = open(&d.0, cfg, true);
    let expect = fill(&log, 30, 4, 6, EncodeOptions::default());
    drop(log);
    // An index renamed to .swap, the log still .cleaned (a garbage one: it must never be used).
    fs::write(suffixed(&d.0, 0, LOG_SUFFIX, CLEANED_SUFFIX), b"garbage").unwrap();
    fs::write(suffixed(&d.0, 0, INDEX_SUFFIX, swap::SWAP_SUFFIX), b"").unwrap();
    let log = open(&d.0, cfg, false);
    assert_eq!(latest(&read_all(&log).0), expect);
    assert!(!suffixed(&d.0, 0, INDEX_SUFFIX, swap::SWAP_SUFFIX).exists());
}

#[test]
fn a_swap_is_abandoned_when_the_log_was_truncated_meanwhile() {
    let d = TempDir::new("cleaner-abandon");
    let log = open(&d.0, compacted(4096), true);
    fill(&log, 30, 4, 6, EncodeOptions::default());
    let view = log.cleaner_view().unwrap();
    log.truncate_to(log.log_end_offset() - 1).unwrap();
    let bases: Vec<i64> = view.segments.iter().take(2).map(|s| s.base).collect();
    assert_eq!(log.swap_in_cleaned(&[bases], view.generation).unwrap(), None);
}

#[test]
fn a_swap_whose_cleaned_segment_is_missing_fails_and_keeps_the_old_segments() {
    let d = TempDir::new("cleaner-missing-cleaned");
    let log = open(&d.0, compacted(2048), true);
    let expect = fill(&log, 30, 4, 6, EncodeOptions::default());
    let view = log.cleaner_view().unwrap();
    let bases: Vec<i64> = view.segments.iter().take(2).map(|s| s.base).collect();
    let err = log.swap_in_cleaned(&[bases.clone()], view.generation).unwrap_err();
    assert!(err.to_string().contains(".log.cleaned"), "{err}");
    assert!(bases.iter().all(|b| log.segment_bases().unwrap().contains(b)));
    let (recs, _) = read_all(&log);
    assert_eq!(latest(&recs), expect);
}

/// Every file of a partition directory named with `.swap` (a swap's leftovers).
fn swap_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.ends_with(swap::SWAP_SUFFIX)).collect();
    v.sort();
    v
}

fn clean_failing(log: &PartitionLog) -> StorageError {
    let cfg = CleanerConfig::default();
    let p = plan(log, &log.cleaner_view().unwrap(), None, 10_000).unwrap();
    clean_log(log, &p, &cfg, cfg.map_bytes_per_thread(), 10_000, &IoThrottle::unlimited(), &AtomicBool::new(false)).unwrap_err()
}

#[test]
fn a_swap_failing_before_its_commit_point_is_rolled_back_so_a_restart_keeps_what_was_written_after_it() {
    let d = TempDir::new("cleaner-swap-fails-uncommitted");
    let cfg = compacted(2048);
    let log = open(&d.0, cfg, true);
    let expect = fill(&log, 40, 5, 6, EncodeOptions::default());
    let bases = log.segment_bases().unwrap();
    assert!(bases.len() > 4, "{bases:?}");
    // The last rename of the commit (the lowest group's `.log`) fails: a directory in its way.
    let obstacle = suffixed(&d.0, bases[0], LOG_SUFFIX, swap::SWAP_SUFFIX);
    fs::create_dir(&obstacle).unwrap();
    let err = clean_failing(&log);
    assert!(err.to_string().contains("rename"), "{err}");
    // Rolled back: the running log keeps every segment and offset, and no `.swap` file is left
    // (before the fix, the higher groups' `.swap` files stayed, looking committed).
    assert_eq!(log.segment_bases().unwrap(), bases);
    assert_eq!(latest(&read_all(&log).0), expect);
    fs::remove_dir(&obstacle).unwrap();
    assert_eq!(swap_files(&d.0), Vec::<String>::new());
    // A new leader's history: the log cut below the second group and written anew past the old end.
    log.truncate_to(bases[1] + 1).unwrap();
    for round in 0..4 {
        let recs: Vec<(String, String)> = (0..40).map(|k| (format!("key-{k}"), format!("new-{k}-{round}"))).collect();
        for chunk in recs.chunks(6) {
            let recs: Vec<(&str, Option<&str>)> = chunk.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect();
            log.append(&batch(&recs, 2_000, EncodeOptions::default()), 0, 0).unwrap();
        }
    }
    let written = read_all(&log).0;
    log.close().unwrap();
    // The restart serves what the running log held (before the fix it completed the abandoned
    // swap: the new records between the stale groups' bounds were replaced by the old cleaned ones).
    let log = open(&d.0, cfg, true);
    let reopened = read_all(&log).0;
    let new = |recs: &[(i64, String, Option<String>)]| recs.iter().filter(|r| r.2.as_deref().is_some_and(|v| v.starts_with("new-"))).count();
    assert!(
        reopened == written,
        "served {} records ({} written after the truncation), after the restart {} ({})",
        written.len(),
        new(&written),
        reopened.len(),
        new(&reopened)
    );
}

#[test]
fn a_swap_failing_after_its_commit_point_closes_the_log_and_the_restart_completes_it() {
    let d = TempDir::new("cleaner-swap-fails-committed");
    // Retired segments are renamed `.deleted` (file.delete.delay.ms): a rename that can fail.
    let cfg = LogConfig { file_delete_delay_ms: 60_000, ..compacted(2048) };
    let log = open(&d.0, cfg, true);
    let expect = fill(&log, 40, 5, 6, EncodeOptions::default());
    let bases = log.segment_bases().unwrap();
    assert!(bases.len() > 4, "{bases:?}");
    // The second old segment cannot be retired: a directory in the way of its `.deleted` name.
    let obstacle = d.0.join(format!("{}.deleted", crate::storage::segment::segment_file_name(bases[1], LOG_SUFFIX)));
    fs::create_dir(&obstacle).unwrap();
    let err = clean_failing(&log);
    assert!(err.to_string().contains("rename for delete"), "{err}");
    // Past the commit point nothing can be taken back: the log is closed, not serving a segment
    // map without the retired segments (before the fix, offsets from the first segment to the
    // third one's base were silently gone while the log took appends and truncations).
    assert!(matches!(log.segment_bases(), Err(StorageError::Closed(_))), "{:?}", log.segment_bases());
    assert!(matches!(log.read(0, 1 << 20, None, true), Err(StorageError::Closed(_))));
    assert!(matches!(log.truncate_to(bases[1]), Err(StorageError::Closed(_))));
    assert!(log.append(&batch(&[("key-0", Some("late"))], 2_000, EncodeOptions::default()), 0, 0).is_err());
    drop(log);
    fs::remove_dir(&obstacle).unwrap();
    // The restart completes the committed swap: every key's latest value, no leftovers.
    let log = open(&d.0, cfg, false);
    let (recs, _) = read_all(&log);
    assert_eq!(latest(&recs), expect);
    assert!(recs.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(swap_files(&d.0), Vec::<String>::new());
}

/// Start `mgr`'s cleaner and wait (30 s at most) for it to take `dir`, `log`'s log dir, offline;
/// returns the offline dirs and their reasons.
fn cleaner_takes_its_dir_offline(mgr: &crate::storage::log_manager::LogManager, log: &PartitionLog, dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    mgr.start_cleaner(CleanerConfig { backoff_ms: 10, ..CleanerConfig::default() }).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while mgr.offline_dirs().is_empty() {
        assert!(Instant::now() < deadline, "the log dir stayed online: {:?}", log.segment_bases());
        std::thread::sleep(Duration::from_millis(10));
    }
    let offline = mgr.offline_dirs();
    assert_eq!(offline[0].0, dir);
    offline
}

#[test]
fn a_cleaner_pass_that_closes_its_log_takes_the_log_dir_offline() {
    let d = TempDir::new("cleaner-swap-fails-offline");
    let mgr = crate::storage::log_manager::LogManager::open(&[d.0.clone()], LogConfig::default()).unwrap();
    let cfg = LogConfig { file_delete_delay_ms: 60_000, min_cleanable_dirty_ratio: 0.01, ..compacted(2048) };
    let log = mgr.create("t", 0, Some(cfg)).unwrap();
    fill(&log, 40, 5, 6, EncodeOptions::default());
    let bases = log.segment_bases().unwrap();
    fs::create_dir(log.dir().join(format!("{}.deleted", crate::storage::segment::segment_file_name(bases[1], LOG_SUFFIX)))).unwrap();
    let offline = cleaner_takes_its_dir_offline(&mgr, &log, &d.0);
    assert!(offline[0].1.contains("rename for delete"), "{offline:?}");
    assert!(matches!(log.segment_bases(), Err(StorageError::Closed(_))));
    mgr.close().unwrap();
}

/// The next rename of a file named `<name_end>` in `dir` fails with EIO (`swap::FAIL_RENAMES`).
fn fail_next_rename(dir: &Path, name_end: &'static str) {
    swap::FAIL_RENAMES.lock().unwrap().push((dir.to_path_buf(), name_end));
}

fn leaked(name: String) -> &'static str {
    Box::leak(name.into_boxed_str())
}

#[test]
fn a_swap_whose_rollback_fails_too_closes_the_log_and_the_restart_serves_no_mixed_group() {
    let d = TempDir::new("cleaner-swap-rollback-fails");
    let cfg = compacted(2048);
    let log = open(&d.0, cfg, true);
    fill(&log, 40, 5, 6, EncodeOptions::default());
    let (before, _) = read_all(&log);
    let bases = log.segment_bases().unwrap();
    assert!(bases.len() > 4, "{bases:?}");
    // The commit's last rename (the lowest group's `.log`) fails, then the rollback's first one.
    fail_next_rename(&d.0, leaked(format!("{}{}", crate::storage::segment::segment_file_name(bases[0], LOG_SUFFIX), swap::CLEANED_SUFFIX)));
    fail_next_rename(&d.0, swap::SWAP_SUFFIX);
    let err = clean_failing(&log);
    assert!(err.to_string().contains("rename"), "{err}");
    assert!(swap::FAIL_RENAMES.lock().unwrap().iter().all(|(dir, _)| dir != &d.0), "both failures were met");
    assert!(!swap_files(&d.0).is_empty(), "the rollback left `.swap` files");
    // The log is closed, not serving (or writing on top of) files half swapped.
    assert!(log.closed_by_failure());
    assert!(matches!(log.segment_bases(), Err(StorageError::Closed(_))), "{:?}", log.segment_bases());
    assert!(matches!(log.read(0, 1 << 20, None, true), Err(StorageError::Closed(_))));
    assert!(log.append(&batch(&[("key-0", Some("late"))], 2_000, EncodeOptions::default()), 0, 0).is_err());
    drop(log);
    // The pass deleted its `.cleaned` files: the restart completes the groups whose `.log` is
    // still `.swap` and drops the others' files, a group whole either way: every key's latest
    // value, no record the log did not hold, no leftovers.
    let log = open(&d.0, cfg, false);
    let (after, _) = read_all(&log);
    assert_eq!(latest(&after), latest(&before));
    assert!(after.iter().all(|r| before.contains(r)), "a record the log never held");
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(swap_files(&d.0), Vec::<String>::new());
}

/// A cleaner thread's swap fails before its commit point (and its rollback too if
/// `rollback_fails`): the log dir goes offline, naming the failed rename, as Kafka's cleaner
/// hands any IOException to the LogDirFailureChannel.
fn a_failed_swap_takes_the_log_dir_offline(rollback_fails: bool) {
    let d = TempDir::new(if rollback_fails { "cleaner-rollback-fails-offline" } else { "cleaner-rolled-back-offline" });
    let mgr = crate::storage::log_manager::LogManager::open(&[d.0.clone()], LogConfig::default()).unwrap();
    let cfg = LogConfig { min_cleanable_dirty_ratio: 0.01, ..compacted(2048) };
    let log = mgr.create("t", 0, Some(cfg)).unwrap();
    fill(&log, 40, 5, 6, EncodeOptions::default());
    let (before, _) = read_all(&log);
    let bases = log.segment_bases().unwrap();
    fail_next_rename(&log.dir(), leaked(format!("{}{}", crate::storage::segment::segment_file_name(bases[0], LOG_SUFFIX), swap::CLEANED_SUFFIX)));
    if rollback_fails {
        fail_next_rename(&log.dir(), swap::SWAP_SUFFIX);
    }
    let offline = cleaner_takes_its_dir_offline(&mgr, &log, &d.0);
    assert!(offline[0].1.contains("rename") && offline[0].1.contains("Input/output error"), "{offline:?}");
    if rollback_fails {
        assert!(matches!(log.segment_bases(), Err(StorageError::Closed(_))));
    } else {
        // rolled back: what the log held is still served (reads go on in an offline dir)
        assert_eq!(log.segment_bases().unwrap(), bases);
        assert_eq!(read_all(&log).0, before);
    }
    mgr.close().unwrap();
}

#[test]
fn a_swap_rolled_back_before_its_commit_point_takes_the_log_dir_offline() {
    a_failed_swap_takes_the_log_dir_offline(false);
}

#[test]
fn a_swap_whose_rollback_fails_takes_the_log_dir_offline() {
    a_failed_swap_takes_the_log_dir_offline(true);
}

#[test]
fn a_pass_planned_before_a_truncation_is_abandoned_and_cleans_nothing() {
    let d = TempDir::new("cleaner-planned-before-truncation");
    let log = open(&d.0, compacted(2048), true);
    fill(&log, 30, 4, 6, EncodeOptions::default());
    let view = log.cleaner_view().unwrap();
    let p = plan(&log, &view, None, 10_000).unwrap();
    assert!(p.cleanable_bytes > 0);
    // A new leader's history cuts the log; the plan's bounds came from the longer log.
    log.truncate_to(log.log_end_offset() - 10).unwrap();
    let before = read_all(&log).0;
    let cfg = CleanerConfig::default();
    let pass = clean_log(&log, &p, &cfg, cfg.map_bytes_per_thread(), 10_000, &IoThrottle::unlimited(), &AtomicBool::new(false)).unwrap();
    assert!(pass.is_none(), "a pass over a plan older than the truncation ran: {pass:?}");
    assert_eq!(read_all(&log).0, before);
    // Planned again, it cleans.
    assert!(clean_once(&log, None, 10_000, &cfg).1.is_some());
}

#[test]
fn a_failed_pass_counts_as_abandoned_when_the_log_was_truncated_or_closed_meanwhile() {
    let d = TempDir::new("cleaner-changed-meanwhile");
    let log = open(&d.0, compacted(2048), true);
    fill(&log, 30, 4, 6, EncodeOptions::default());
    let p = plan(&log, &log.cleaner_view().unwrap(), None, 10_000).unwrap();
    assert!(!log_changed_since(&log, &p), "nothing happened: a failure now is the log's own (uncleanable)");
    log.truncate_to(log.log_end_offset() - 10).unwrap();
    assert!(log_changed_since(&log, &p), "truncated");
    let p = plan(&log, &log.cleaner_view().unwrap(), None, 10_000).unwrap();
    log.close().unwrap();
    assert!(log_changed_since(&log, &p), "closed (moved to another dir or deleted)");
}

#[test]
fn segments_are_grouped_up_to_segment_bytes() {
    let seg = |base, end, size| CleanerSegment { base, end, size, offset_index_bytes: 8, time_index_bytes: 12 };
    let segs = [seg(0, 10, 400), seg(10, 20, 400), seg(20, 30, 400), seg(30, 40, 0), seg(40, 50, 900)];
    let groups: Vec<Vec<i64>> = group_segments(&segs, 1000, 1 << 20).iter().map(|g| g.iter().map(|s| s.base).collect()).collect();
    assert_eq!(groups, vec![vec![0, 10], vec![20, 30], vec![40]]);
    let groups = group_segments(&segs, 1 << 20, 16);
    assert_eq!(groups.len(), 5, "index bytes bound each group too");
}

#[test]
fn segments_younger_than_min_compaction_lag_stay_dirty() {
    let d = TempDir::new("cleaner-min-lag");
    let log = open(&d.0, LogConfig { min_compaction_lag_ms: 500, ..compacted(2048) }, true);
    fill(&log, 20, 2, 5, EncodeOptions::default()); // timestamps 1000 and 1001
    let young = log.log_end_offset();
    log.append(&batch(&[("key-0", Some("late"))], 5_000, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let view = log.cleaner_view().unwrap();
    let p = plan(&log, &view, None, 5_200).unwrap();
    assert_eq!(p.first_uncleanable, young, "the segment written 200 ms ago is not cleanable: {p:?}");
    let p = plan(&log, &view, None, 5_600).unwrap();
    assert_eq!(p.first_uncleanable, view.active_base, "500 ms later it is: {p:?}");
}

#[test]
fn a_log_under_the_dirty_ratio_is_cleaned_once_a_dirty_record_is_older_than_max_compaction_lag() {
    let d = TempDir::new("cleaner-max-lag");
    let cfg = LogConfig { min_cleanable_dirty_ratio: 0.9, max_compaction_lag_ms: 10_000, ..compacted(2048) };
    let log = open(&d.0, cfg, true);
    fill(&log, 50, 6, 7, EncodeOptions::default());
    let (_, r) = clean_once(&log, None, 2_000, &CleanerConfig::default());
    let (cleaned_to, _) = r.unwrap();
    log.append(&batch(&[("key-1", Some("dirty"))], 3_000, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let view = log.cleaner_view().unwrap();
    let p = plan(&log, &view, Some(cleaned_to), 5_000).unwrap();
    assert!(p.cleanable_bytes > 0 && p.dirty_ratio < 0.9 && !p.overdue && !p.is_cleanable(0.9), "{p:?}");
    let p = plan(&log, &view, Some(cleaned_to), 13_001).unwrap();
    assert!(p.overdue && p.is_cleanable(0.9), "{p:?}");
}

fn shared_over(logs: Vec<Arc<PartitionLog>>, checkpoints: HashMap<(String, i32), i64>) -> CleanerShared {
    CleanerShared {
        config: CleanerConfig::default(),
        dirs: vec![],
        logs: Arc::new(move || logs.iter().map(|l| (0, l.clone())).collect()),
        dir_failed: Arc::new(|_, _| {}),
        state: Mutex::new(CleanerState {
            in_progress: HashSet::new(),
            uncleanable: HashSet::new(),
            checkpoints: vec![checkpoints],
            stats: CleanStats::default(),
            stopping: false,
        }),
        wake: Condvar::new(),
        stop: AtomicBool::new(false),
        throttle: IoThrottle::unlimited(),
    }
}

#[test]
fn the_dirtiest_log_is_cleaned_first_and_a_log_in_progress_is_not_taken_twice() {
    let d = TempDir::new("cleaner-dirtiest");
    let open_partition = |p: i32, cfg: LogConfig| {
        let dir = d.0.join(format!("t-{p}"));
        fs::create_dir_all(&dir).unwrap();
        Arc::new(PartitionLog::open(&dir, "t", p, cfg, LogOpenOptions { clean_shutdown: true, ..Default::default() }).unwrap())
    };
    // Partition 0: cleaned once, then a little more written (dirty ratio well under 1).
    let half_clean = open_partition(0, LogConfig { min_cleanable_dirty_ratio: 0.01, ..compacted(2048) });
    fill(&half_clean, 50, 6, 7, EncodeOptions::default());
    let (_, r) = clean_once(&half_clean, None, 2_000, &CleanerConfig::default());
    let (cleaned_to, _) = r.unwrap();
    fill(&half_clean, 10, 1, 5, EncodeOptions::default());
    // Partition 1: never cleaned (dirty ratio 1). Partition 2: delete policy, never a candidate.
    let dirty = open_partition(1, LogConfig { min_cleanable_dirty_ratio: 0.01, ..compacted(2048) });
    fill(&dirty, 20, 3, 5, EncodeOptions::default());
    let deleting = open_partition(2, LogConfig { compact: false, delete: true, ..compacted(2048) });
    fill(&deleting, 20, 3, 5, EncodeOptions::default());
    let shared = shared_over(vec![half_clean.clone(), dirty.clone(), deleting], HashMap::from([(("t".to_owned(), 0), cleaned_to)]));
    let (_, first, p1) = shared.grab_filthiest(10_000).unwrap();
    assert_eq!(first.partition(), 1, "dirty ratio 1 before {p1:?}");
    let (_, second, p0) = shared.grab_filthiest(10_000).unwrap();
    assert_eq!(second.partition(), 0);
    assert!(p0.dirty_ratio < p1.dirty_ratio && p0.first_dirty == cleaned_to, "{p0:?}");
    assert!(shared.grab_filthiest(10_000).is_none(), "both are in progress; the delete-policy log is never taken");
}

#[test]
fn threads_choosing_at_the_same_moment_never_take_the_same_log() {
    let d = TempDir::new("cleaner-choose-race");
    let dir = d.0.join("t-0");
    fs::create_dir_all(&dir).unwrap();
    let log = Arc::new(PartitionLog::open(&dir, "t", 0, compacted(2048), LogOpenOptions { clean_shutdown: true, ..Default::default() }).unwrap());
    fill(&log, 40, 5, 4, EncodeOptions::default());
    let shared = Arc::new(shared_over(vec![log], HashMap::new()));
    for round in 0..20 {
        let threads = 8;
        let start = Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (shared, start) = (shared.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    shared.grab_filthiest(10_000).is_some()
                })
            })
            .collect();
        let taken = handles.into_iter().map(|h| h.join().unwrap()).filter(|t| *t).count();
        assert_eq!(taken, 1, "round {round}: the log was taken by {taken} threads at once");
        lock(&shared.state).in_progress.clear();
    }
}

#[test]
fn two_cleaner_threads_clean_every_compacted_log_and_write_the_checkpoint() {
    let d = TempDir::new("cleaner-threads");
    let logs: Vec<Arc<PartitionLog>> = (0..4)
        .map(|p| {
            let dir = d.0.join(format!("t-{p}"));
            fs::create_dir_all(&dir).unwrap();
            let cfg = LogConfig { min_cleanable_dirty_ratio: 0.01, ..compacted(2048) };
            Arc::new(PartitionLog::open(&dir, "t", p, cfg, LogOpenOptions { clean_shutdown: true, ..Default::default() }).unwrap())
        })
        .collect();
    let expected: Vec<_> = logs.iter().map(|l| fill(l, 30 + l.partition() as usize, 5, 4, EncodeOptions::default())).collect();
    let listed = logs.clone();
    let cfg = CleanerConfig { threads: 2, backoff_ms: 10, ..CleanerConfig::default() };
    let cleaner = LogCleaner::start(cfg, vec![d.0.clone()], Arc::new(move || listed.iter().map(|l| (0, l.clone())).collect())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let want: Vec<(String, i32, i64)> = logs.iter().map(|l| ("t".to_owned(), l.partition(), l.log_end_offset())).collect();
    while cleaner.checkpoints() != want {
        assert!(Instant::now() < deadline, "not all cleaned: {:?}", cleaner.checkpoints());
        std::thread::sleep(Duration::from_millis(10));
    }
    cleaner.stop();
    assert!(cleaner.stats().passes >= 4, "{:?}", cleaner.stats());
    for (log, expect) in logs.iter().zip(&expected) {
        let (records, _) = read_all(log);
        assert_eq!(records.len(), expect.len(), "one record per key in partition {}", log.partition());
        assert_eq!(&latest(&records), expect);
    }
    let written = fs::read_to_string(d.0.join(CLEANER_OFFSET_CHECKPOINT)).unwrap();
    assert_eq!(written.lines().count(), 2 + 4, "{written}");
}

#[test]
fn a_pass_under_log_cleaner_io_max_bytes_per_second_takes_at_least_its_bytes_over_the_rate() {
    let d = TempDir::new("cleaner-throttled");
    let log = open(&d.0, compacted(4096), true);
    let expect = fill(&log, 50, 6, 7, EncodeOptions::default());
    let view = log.cleaner_view().unwrap();
    let p = plan(&log, &view, None, 10_000).unwrap();
    let rate = 20_000.0;
    let cfg = CleanerConfig { io_max_bytes_per_second: rate, ..CleanerConfig::default() };
    let started = Instant::now();
    let throttle = IoThrottle::new(rate);
    let (_, stats) = clean_log(&log, &p, &cfg, cfg.map_bytes_per_thread(), 10_000, &throttle, &AtomicBool::new(false)).unwrap().unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let charged = (stats.map_bytes_read + stats.bytes_read + stats.bytes_written) as f64;
    // The last window (worth less than CHECK_INTERVAL) is not slept for.
    let least = charged / rate - throttle::CHECK_INTERVAL.as_secs_f64();
    assert!(least > 0.3 && elapsed >= least, "{charged} bytes at {rate} B/s in {elapsed:.2} s");
    assert_eq!(latest(&read_all(&log).0), expect);
}

/// A transaction marker of `producer_id`: an ABORT (type 0) or COMMIT (1) control record.
fn marker(producer_id: i64, commit: bool, ts: i64) -> Vec<u8> {
    let opts = EncodeOptions { producer_id, producer_epoch: 0, is_transactional: true, is_control: true, ..Default::default() };
    let mut w = BatchWriter::new(opts);
    let key = [0u8, 0, 0, commit as u8];
    let value = [0u8, 0, 0, 0, 0, 5];
    w.append::<&[u8], &[u8]>(ts, Some(&key[..]), Some(&value[..]), &[]).unwrap();
    w.finish().unwrap()
}

fn transactional(producer_id: i64, seq: i32) -> EncodeOptions {
    EncodeOptions { producer_id, producer_epoch: 0, base_sequence: seq, is_transactional: true, ..Default::default() }
}

/// The .txnindex entry Kafka (and the broker) writes for an aborted transaction.
fn index_aborted(dir: &Path, segment_base: i64, producer_id: i64, first: i64, last: i64) {
    let mut e = Vec::new();
    e.extend_from_slice(&0i16.to_be_bytes());
    for v in [producer_id, first, last, last + 1] {
        e.extend_from_slice(&v.to_be_bytes());
    }
    let path = dir.join(format!("{segment_base:020}.txnindex"));
    let mut data = fs::read(&path).unwrap_or_default();
    data.extend_from_slice(&e);
    fs::write(path, data).unwrap();
}

fn control_offsets(headers: &[BatchHeader]) -> Vec<(i64, Option<i64>, i32)> {
    headers.iter().filter(|h| h.is_control()).map(|h| (h.base_offset, h.delete_horizon(), h.records_count)).collect()
}

#[test]
fn aborted_transactions_go_and_their_markers_after_delete_retention_while_committed_ones_stay() {
    let d = TempDir::new("cleaner-txn");
    let mut cfg = compacted(1 << 20);
    cfg.delete_retention_ms = 1_000;
    let log = open(&d.0, cfg, true);
    log.append(&batch(&[("k1", Some("c0"))], 100, EncodeOptions::default()), 0, 0).unwrap(); // 0
    log.append(&batch(&[("k1", Some("aborted")), ("k2", Some("aborted"))], 100, transactional(7, 0)), 0, 0).unwrap(); // 1-2
    log.append(&batch(&[("k3", Some("committed"))], 100, transactional(8, 0)), 0, 0).unwrap(); // 3
    log.append(&marker(7, false, 100), 0, 0).unwrap(); // 4: ABORT of 7
    log.append(&marker(8, true, 100), 0, 0).unwrap(); // 5: COMMIT of 8
    log.append(&batch(&[("k4", Some("after"))], 100, transactional(7, 2)), 0, 0).unwrap(); // 6: 7's next transaction
    log.append(&marker(7, true, 100), 0, 0).unwrap(); // 7: COMMIT of 7
    // the transactional appends bounded the first unstable offset; the broker lifts the bound once it has
    // accounted the transactions' ends
    log.set_first_unstable_offset(i64::MAX);
    index_aborted(&d.0, 0, 7, 1, 4);
    seal(&log);
    let (_, r) = clean_once(&log, None, 10_000, &CleanerConfig::default());
    let (end, _) = r.unwrap();
    let (recs, headers) = read_all(&log);
    let data: Vec<(i64, String, Option<String>)> = recs.into_iter().filter(|(o, _, _)| ![4, 5, 7].contains(o)).collect();
    // the aborted k1 neither survives nor shadows the committed c0 before it
    assert_eq!(data, vec![(0, "k1".into(), Some("c0".into())), (3, "k3".into(), Some("committed".into())), (6, "k4".into(), Some("after".into()))]);
    // every marker stays in this pass: each transaction still had batches when it was read
    assert_eq!(control_offsets(&headers), vec![(4, None, 1), (5, None, 1), (7, None, 1)]);
    // Next pass: the aborted transaction has no batch left, so its marker gets a delete horizon.
    log.append(&batch(&[("k5", Some("x"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let (_, r) = clean_once(&log, Some(end), 20_000, &CleanerConfig::default());
    let (end, _) = r.unwrap();
    assert_eq!(control_offsets(&read_all(&log).1), vec![(4, Some(21_000), 1), (5, None, 1), (7, None, 1)]);
    // Past the horizon the marker stays while the index still lists its transaction...
    log.append(&batch(&[("k6", Some("x"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let (_, r) = clean_once(&log, Some(end), 30_000, &CleanerConfig::default());
    let (end, _) = r.unwrap();
    assert_eq!(control_offsets(&read_all(&log).1), vec![(4, Some(21_000), 1), (5, None, 1), (7, None, 1)]);
    // ...and goes once the broker dropped the entry; the committed transactions' markers stay with their data.
    for f in fs::read_dir(&d.0).unwrap().flatten() {
        if f.path().extension().is_some_and(|e| e == "txnindex") {
            fs::remove_file(f.path()).unwrap();
        }
    }
    log.append(&batch(&[("k7", Some("x"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    clean_once(&log, Some(end), 40_000, &CleanerConfig::default()).1.unwrap();
    let (recs, headers) = read_all(&log);
    assert_eq!(control_offsets(&headers), vec![(5, None, 1), (7, None, 1)]);
    let keys: Vec<String> = recs.into_iter().filter(|(o, _, _)| ![5, 7].contains(o)).map(|(_, k, _)| k).collect();
    assert_eq!(keys, vec!["k1", "k3", "k4", "k5", "k6", "k7"]);
}

#[test]
fn a_committed_transactions_marker_goes_once_compaction_removed_its_records() {
    let d = TempDir::new("cleaner-txn-commit");
    let mut cfg = compacted(1 << 20);
    cfg.delete_retention_ms = 1_000;
    let log = open(&d.0, cfg, true);
    log.append(&batch(&[("a", Some("1"))], 100, transactional(9, 0)), 0, 0).unwrap(); // 0
    log.append(&marker(9, true, 100), 0, 0).unwrap(); // 1
    log.set_first_unstable_offset(i64::MAX); // the broker, once it has accounted the commit
    log.append(&batch(&[("a", Some("2"))], 100, EncodeOptions::default()), 0, 0).unwrap(); // 2: shadows a=1
    seal(&log);
    // (producer 9 idle past its expiration: its emptied batch is not kept for its sequence state)
    let cleaner = CleanerConfig { producer_id_expiration_ms: 1_000, ..Default::default() };
    let (_, r) = clean_once(&log, None, 10_000, &cleaner);
    let (end, _) = r.unwrap();
    // the committed record was superseded, but it was read in this pass: the marker stays as it is
    assert_eq!(control_offsets(&read_all(&log).1), vec![(1, None, 1)]);
    log.append(&batch(&[("b", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    let (_, r) = clean_once(&log, Some(end), 20_000, &cleaner);
    let (end, _) = r.unwrap();
    let headers = read_all(&log).1;
    assert!(control_offsets(&headers).iter().all(|&(o, h, _)| o == 1 && h == Some(21_000)), "{:?}", control_offsets(&headers));
    log.append(&batch(&[("c", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap();
    seal(&log);
    clean_once(&log, Some(end), 30_000, &cleaner).1.unwrap();
    let (recs, headers) = read_all(&log);
    assert!(control_offsets(&headers).iter().all(|&(_, _, n)| n == 0), "only an empty header may stay: {:?}", control_offsets(&headers));
    assert_eq!(recs.into_iter().map(|(_, k, v)| (k, v)).collect::<Vec<_>>(),
               vec![("a".into(), Some("2".into())), ("b".into(), Some("1".into())), ("c".into(), Some("1".into()))]);
}

#[test]
fn the_cleaner_stops_below_the_first_unstable_offset() {
    let d = TempDir::new("cleaner-lso");
    let log = open(&d.0, compacted(1 << 20), true);
    log.append(&batch(&[("a", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap(); // 0
    log.roll().unwrap();
    log.append(&batch(&[("a", Some("open"))], 100, transactional(5, 0)), 0, 0).unwrap(); // 1: open transaction
    log.roll().unwrap();
    log.append(&batch(&[("b", Some("1"))], 100, EncodeOptions::default()), 0, 0).unwrap(); // 2
    seal(&log);
    log.set_first_unstable_offset(1);
    let (p, r) = clean_once(&log, None, 10_000, &CleanerConfig::default());
    assert_eq!(p.first_uncleanable, 1, "{p:?}");
    assert_eq!(r.unwrap().0, 1);
    // a=1 is not shadowed by the open transaction's record
    assert_eq!(read_all(&log).0[0], (0, "a".into(), Some("1".into())));
}

#[test]
fn aborted_transactions_moved_to_another_index_file_during_the_read_are_all_found() {
    let d = TempDir::new("cleaner-txnindex-moved");
    index_aborted(&d.0, 0, 7, 1, 4);
    index_aborted(&d.0, 100, 8, 101, 104);
    index_aborted(&d.0, 200, 9, 201, 204);
    let (orphan, survivor) = (d.0.join(format!("{:020}.txnindex", 100)), d.0.join(format!("{:020}.txnindex", 0)));
    let mut moved = false;
    // The broker's remove_orphans runs just after the cleaner read segment 0's index: it appends 100's entries
    // to 0's (the cleaner replaced segment 100 by its cleaned segment 0) and deletes 100's file.
    let found = txn::read_aborted_with(&d.0, |path| {
        let data = fs::read(path);
        if !moved && path == survivor {
            moved = true;
            let mut into = fs::read(&survivor).unwrap();
            into.extend_from_slice(&fs::read(&orphan).unwrap());
            fs::write(&survivor, into).unwrap();
            fs::remove_file(&orphan).unwrap();
        }
        data
    });
    assert!(moved);
    let ids: Vec<i64> = found.iter().map(|a| a.producer_id).collect();
    assert_eq!(ids, vec![7, 8, 9], "{found:?}");
}
