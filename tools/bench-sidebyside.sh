#!/usr/bin/env bash
# klog vs Apache Kafka 4.x on this machine, in the same run: starts both brokers with the same settings (each on
# its own port and data directory), measures every workload on one and then at once on the other (paired, so a
# ratio compares measurements seconds apart), drives both with Kafka's ProducerPerformance/ConsumerPerformance
# and confluent-kafka, and writes docs/performance.json, docs/performance.md and docs/img/perf-*.png.
# Takes about 25-35 minutes (3 paired runs); run it on a quiet machine (the report flags loaded pairs).
#   bash tools/bench-sidebyside.sh                 # the full comparison, 3 runs
#   bash tools/bench-sidebyside.sh --quick         # smoke run (about a minute; output under .cache/sidebyside)
#   bash tools/bench-sidebyside.sh --help          # options (--runs, --scale, --only, --report-only, ...)
#   bash tools/bench-sidebyside.sh --only consume/java/100B/1p --runs 1   # one workload (+ its producer), output
#                                                  # under .cache/sidebyside like --quick
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
PYTHON=${PYTHON:-$repo/.venv/bin/python}

bash tools/install-peers.sh
"$PYTHON" -c "import confluent_kafka, matplotlib, klog._native" 2>/dev/null || {
  echo "bench-sidebyside: $PYTHON lacks klog's test extras (confluent-kafka, matplotlib): run \`make dev\`" >&2
  exit 2
}
mkdir -p .cache/sidebyside
# Run from outside the source tree so an installed klog is not shadowed by ./klog.
cd .cache/sidebyside
PYTHONPATH="$repo/benches${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m sidebyside "$@"
