#!/usr/bin/env bash
# libFuzzer (cargo-fuzz) runs of the native decoders: rust/klog-core/fuzz/fuzz_targets/*.rs.
#
#   bash tools/fuzz.sh short          # make fuzz-short: every target, seeded, ~5 s each, from the committed seeds only
#   bash tools/fuzz.sh long [SECONDS] # `make fuzz`: every target SECONDS (default 3600) at nice 19, in turn,
#                                     # growing rust/klog-core/fuzz/corpus/<target> (kept between runs)
#
# FUZZ_TARGETS="a b" limits a run to those targets (two runs with disjoint lists use both cores). A long run ends
# with a table: inputs executed per target, their total, and each corpus's size (files and bytes).
# FUZZ_SANITIZER=none builds without AddressSanitizer (cargo fuzz -s none: several times the inputs a second; the
# core's unsafe code is then checked by Rust's own bounds checks only).
#
# Installs what it needs: the nightly toolchain (libFuzzer needs -Zsanitizer) and cargo-fuzz. A crash stops
# the run with a non-zero exit; the input is in rust/klog-core/fuzz/artifacts/<target>/ (turn it into a
# regression test in the target's module, then fix).
set -euo pipefail
cd "$(dirname "$0")/../rust/klog-core/fuzz"
mode=${1:-short}
ALL_TARGETS=(validate_produce decode_batches decode_columns decompress prepare_append recover_log)
read -r -a TARGETS <<< "${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"
for target in "${TARGETS[@]}"; do
    [[ " ${ALL_TARGETS[*]} " == *" $target "* ]] || { echo "tools/fuzz.sh: no fuzz target $target" >&2; exit 2; }
done

if ! command -v rustup >/dev/null; then
    echo "tools/fuzz.sh: rustup is needed to install the nightly toolchain cargo-fuzz builds with" >&2
    exit 1
fi
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz

sanitizer=(-s "${FUZZ_SANITIZER:-address}")
# a long run yields the CPU to other work (nice 19), its build too; a short run has the machine to itself
niceness=0; [ "$mode" = long ] && niceness=19
echo "== cargo fuzz build (${TARGETS[*]}; sanitizer ${FUZZ_SANITIZER:-address})"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} nice -n "$niceness" cargo +nightly fuzz build -O "${sanitizer[@]}" 2>&1 | tail -1

case "$mode" in
short)
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    for target in "${TARGETS[@]}"; do
        mkdir -p "$scratch/$target"
        echo "== fuzz $target (seeded, 5 s)"
        if ! cargo +nightly fuzz run -O "${sanitizer[@]}" "$target" "$scratch/$target" "seeds/$target" -- \
                -seed=1 -max_total_time=5 -max_len=8192 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
                >"$scratch/$target.log" 2>&1; then
            tail -40 "$scratch/$target.log" >&2
            echo "fuzz target $target failed: the input is in rust/klog-core/fuzz/artifacts/$target/" >&2
            exit 1
        fi
        grep -E '^stat::(number_of_executed_units|new_units_added)' "$scratch/$target.log"
    done
    ;;
long)
    seconds=${2:-3600}
    logs=$(mktemp -d)
    trap 'rm -rf "$logs"' EXIT
    for target in "${TARGETS[@]}"; do
        mkdir -p "corpus/$target"
        echo "== fuzz $target for ${seconds}s (corpus/$target)"
        # the output goes to the terminal and to a log the summary reads (libFuzzer prints its stats on stderr)
        nice -n "$niceness" cargo +nightly fuzz run -O "${sanitizer[@]}" "$target" "corpus/$target" "seeds/$target" -- \
            -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
            2>&1 | tee "$logs/$target.log"
    done
    echo "== fuzz summary ($(date -u +%FT%TZ), ${seconds}s a target)"
    total=0
    printf '%-18s %15s %13s %13s\n' target inputs corpus_files corpus_bytes
    for target in "${TARGETS[@]}"; do
        runs=$(grep -E '^stat::number_of_executed_units' "$logs/$target.log" | awk '{print $2}' | tail -1)
        runs=${runs:-0}
        total=$((total + runs))
        printf '%-18s %15d %13d %13d\n' "$target" "$runs" "$(find "corpus/$target" -type f | wc -l)" \
            "$(du -sb "corpus/$target" | cut -f1)"
    done
    printf '%-18s %15d\n' total "$total"
    ;;
*)
    echo "usage: tools/fuzz.sh short|long [seconds]" >&2
    exit 2
    ;;
esac
