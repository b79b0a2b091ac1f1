#!/usr/bin/env bash
# libFuzzer (cargo-fuzz) runs of the native decoders: rust/klog-core/fuzz/fuzz_targets/*.rs.
#
#   bash tools/fuzz.sh short          # CI: every target, seeded, ~12 s each, from the committed seeds only
#   bash tools/fuzz.sh long [SECONDS] # `make fuzz`: every target SECONDS (default 3600) at nice 19, in turn,
#                                     # growing rust/klog-core/fuzz/corpus/<target> (kept between runs)
#
# Installs what it needs: the nightly toolchain (libFuzzer needs -Zsanitizer) and cargo-fuzz. A crash stops
# the run with a non-zero exit; the input is in rust/klog-core/fuzz/artifacts/<target>/ (turn it into a
# regression test in the target's module, then fix).
set -euo pipefail
cd "$(dirname "$0")/../rust/klog-core/fuzz"
mode=${1:-short}
TARGETS=(validate_produce decode_batches decode_columns decompress prepare_append recover_log)

if ! command -v rustup >/dev/null; then
    echo "tools/fuzz.sh: rustup is needed to install the nightly toolchain cargo-fuzz builds with" >&2
    exit 1
fi
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz

echo "== cargo fuzz build (${TARGETS[*]})"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo +nightly fuzz build -O 2>&1 | tail -1

case "$mode" in
short)
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    for target in "${TARGETS[@]}"; do
        mkdir -p "$scratch/$target"
        echo "== fuzz $target (seeded, 12 s)"
        if ! cargo +nightly fuzz run -O "$target" "$scratch/$target" "seeds/$target" -- \
                -seed=1 -max_total_time=12 -max_len=8192 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
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
    for target in "${TARGETS[@]}"; do
        mkdir -p "corpus/$target"
        echo "== fuzz $target for ${seconds}s (corpus/$target)"
        nice -n 19 cargo +nightly fuzz run -O "$target" "corpus/$target" "seeds/$target" -- \
            -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1
    done
    ;;
*)
    echo "usage: tools/fuzz.sh short|long [seconds]" >&2
    exit 2
    ;;
esac
