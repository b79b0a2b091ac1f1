#!/usr/bin/env bash
# Set up and run klog's whole test suite, the way CI does on a fresh machine:
# installs the peers (kcat, Apache Kafka jars), builds a release wheel, installs it into a fresh
# virtualenv with the test extras, then runs `cargo test` and pytest against the installed wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step says when it starts (seconds since this script began): where CI's time goes.
step() { echo "== $* (at ${SECONDS} s)"; }
PYTHON=${PYTHON:-python3}
VENV=.venv-test

# Disk: the Rust builds (target/), the test virtualenv and the suite's broker logs take about 4 GB. A machine
# short of it fails deep inside a compiler with "No space left on device"; say so first, with the figures.
need_mb=${KLOG_TEST_DISK_MB:-4096}
for dir in . "${TMPDIR:-/tmp}"; do
    free_mb=$(df -Pm "$dir" | awk 'NR == 2 {print $4}')
    if [ "${free_mb:-0}" -lt "$need_mb" ]; then
        echo "== warning: ${free_mb} MB free on the filesystem of $(cd "$dir" && pwd); the build and the suite need about ${need_mb} MB" >&2
    fi
done

bash tools/install-peers.sh

step "build: release wheel"
[ -x .venv/bin/maturin ] || { $PYTHON -m venv .venv && .venv/bin/pip install -q -U pip maturin; }
rm -rf dist
# The build's output is kept and shown in full when it fails (a compiler error is not cut to its last line).
build_log=$(mktemp)
if ! .venv/bin/maturin build --release --out dist --interpreter "$PYTHON" >"$build_log" 2>&1; then
    cat "$build_log"
    echo "== build failed (full output above)" >&2
    exit 1
fi
tail -1 "$build_log"
rm -f "$build_log"
wheel=$(ls dist/klog-*.whl)

# klog-core's tests include CI's short fuzz run (tests/fuzz_seeds.rs: each fuzz target's check on its seeds and
# seeded mutations of them); the libFuzzer runs are make fuzz-short and make fuzz. They build and run while pip
# installs (pip waits on downloads and the disk, the compiler on the CPU); their output is shown after.
step "cargo test (klog-core), beside the install"
cargo_log=$(mktemp)
cargo test --quiet -p klog-core >"$cargo_log" 2>&1 &
cargo_pid=$!
trap 'kill "$cargo_pid" 2>/dev/null || true' EXIT  # a failed install does not leave the build running

step "install: $wheel with the test and spark extras into a fresh $VENV"
rm -rf "$VENV"
$PYTHON -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip
# pip's own "Successfully installed ..." line says what was installed; a failure shows pip's whole output.
install_log=$(mktemp)
if ! "$VENV/bin/pip" install --progress-bar off "${wheel}[test,spark]" >"$install_log" 2>&1; then
    cat "$install_log"
    echo "== install failed (full output above)" >&2
    exit 1
fi
grep '^Successfully installed' "$install_log" || true
rm -f "$install_log"

step "cargo test: waiting for it to finish"
cargo_rc=0
wait "$cargo_pid" || cargo_rc=$?
trap - EXIT
cat "$cargo_log"
rm -f "$cargo_log"
if [ "$cargo_rc" -ne 0 ]; then
    echo "== cargo test failed (exit $cargo_rc; output above)" >&2
    exit 1
fi

step "pytest (against the installed wheel)"
# Run the venv's pytest directly (not `python -m pytest`) so the source tree's klog/ is not
# on sys.path: the tests import the installed wheel. KLOG_EXPECT_INSTALLED makes a test check it.
# PYTHONSAFEPATH keeps `python -c`/`-m` subprocesses (broker processes, Spark's Python workers)
# from putting the current directory, this source tree, first on sys.path.
export KLOG_EXPECT_INSTALLED=1 PYTHONSAFEPATH=1
# The nightly suite's tests (marker long, minutes each) are left out here: `make test-long` runs them.
# Test modules run in KLOG_TEST_WORKERS processes at once (pytest-xdist; each module whole on one worker, so
# a module's brokers and clusters are started once): most of the suite waits on broker processes, elections
# and timeouts rather than computing. KLOG_TEST_WORKERS=0 runs everything in this process, one at a time.
exec "$VENV/bin/pytest" tests -m "${KLOG_TEST_MARKERS:-not long}" -n "${KLOG_TEST_WORKERS:-2}" --dist loadfile "$@"
