//! CI's short fuzz run: every fuzz target's check (`fuzz/checks/`) on each committed seed
//! (`fuzz/seeds/<target>/`) and on seeded mutations of them (bit flips, interesting integers at random
//! places, truncations, duplications, insertions and splices between seeds). The same inputs every run, so a
//! failure reproduces; the coverage-guided libFuzzer runs are `make fuzz` (`tools/fuzz.sh`).
//! `KLOG_FUZZ_MUTATIONS` sets the mutations per target (default 100,000; recover_log, which writes files,
//! a tenth of that) and `KLOG_FUZZ_SEED` the seed.

#[path = "../fuzz/checks/mod.rs"]
mod checks;

use std::path::PathBuf;

/// splitmix64: a small, well-mixed generator; the run depends on nothing but its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that sit on the decoders' boundaries: zero, one, sign changes, the largest and smallest of each width.
const INTERESTING_I32: [i32; 10] = [0, 1, -1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, i32::MAX, i32::MIN];

/// Largest input a mutation may grow to, as libFuzzer's `-max_len` in `tools/fuzz.sh`.
const MAX_LEN: usize = 8192;

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] = rng.next() as u8;
            }
            2 if data.len() >= 4 => {
                let at = rng.below(data.len() - 3);
                let value = INTERESTING_I32[rng.below(INTERESTING_I32.len())];
                data[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
            3 if !data.is_empty() => data.truncate(rng.below(data.len())),
            4 if !data.is_empty() => {
                let (from, len) = (rng.below(data.len()), 1 + rng.below(64));
                let piece: Vec<u8> = data[from..(from + len).min(data.len())].to_vec();
                let at = rng.below(data.len() + 1);
                data.splice(at..at, piece);
            }
            5 => {
                let at = rng.below(data.len() + 1);
                let piece: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
                data.splice(at..at, piece);
            }
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(data.len() + 1);
                let from = rng.below(other.len() + 1);
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
        }
    }
    data.truncate(MAX_LEN);
    data
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds").join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text.parse().unwrap_or_else(|_| panic!("{name}={text:?} is not a whole number")),
        Err(_) => default,
    }
}

/// Runs `check` on every seed, then on the mutations; a panic names the input (hex) so it can become a seed.
fn run(target: &str, check: fn(&[u8]), share: u64) {
    let seeds = seeds(target);
    for seed in &seeds {
        check(seed);
    }
    let count = env_number("KLOG_FUZZ_MUTATIONS", 100_000) / share;
    let mut rng = Rng(env_number("KLOG_FUZZ_SEED", 1) ^ target.len() as u64);
    for n in 0..count {
        let input = mutate(&mut rng, &seeds);
        let outcome = std::panic::catch_unwind(|| check(&input));
        if let Err(panic) = outcome {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("{target}: mutation {n} failed; its input (hex): {hex}");
            std::panic::resume_unwind(panic);
        }
    }
}

/// One test per fuzz target: `name` is the target and its check's module; `share` divides the mutation count.
macro_rules! seeds_and_mutations {
    ($($test:ident: $name:ident / $share:expr),* $(,)?) => {$(
        #[test]
        fn $test() {
            run(stringify!($name), checks::$name::check, $share);
        }
    )*};
}

seeds_and_mutations! {
    validate_produce_seeds_and_mutations: validate_produce / 1,
    decode_batches_seeds_and_mutations: decode_batches / 1,
    decode_columns_seeds_and_mutations: decode_columns / 1,
    decompress_seeds_and_mutations: decompress / 1,
    prepare_append_seeds_and_mutations: prepare_append / 1,
}

#[test]
fn recover_log_seeds_and_mutations() {
    run("recover_log", checks::recover_log::check, 10);   // writes a partition directory per input
    let _ = std::fs::remove_dir_all(checks::recover_log::scratch());
}
