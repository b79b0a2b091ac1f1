# The two commands a new user needs (see README):
#   make broker   set up and run klog-broker on its embedded default (arguments: make broker ARGS="...")
#   make test     set up and run the whole test suite (Rust and Python) against a release wheel
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: broker test test-long librdkafka-suite dev bench sidebyside sidebyside-cluster fuzz fuzz-short chaos chaos-compaction chaos-replication chaos-cluster clean

$(BIN)/maturin:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip maturin

# Editable developer install (release-mode native build) with the test extras.
dev: $(BIN)/maturin
	$(BIN)/maturin develop --release -E test

# make broker ARGS="config/server.properties --override listeners=PLAINTEXT://127.0.0.1:9093"
# The build prints nothing unless it fails (then its whole output).
broker: $(BIN)/maturin
	@echo "== building klog (release) into $(VENV)"
	@$(BIN)/maturin develop --release > $(VENV)/build.log 2>&1 || { cat $(VENV)/build.log; exit 1; }
	$(BIN)/klog-broker $(ARGS)

test:
	bash tools/test.sh

# The nightly suite: the tests marked long (Kafka's side of the fault runs, cluster scenarios and Spark reads, the Spark standalone cluster,
# the oldest PySpark, the side-by-side smokes), set up as make test does; about two hours. One test at a time
# (they start 3- and 6-node clusters and time failovers; KLOG_TEST_WORKERS=2 to share them out).
test-long:
	KLOG_TEST_MARKERS=long KLOG_TEST_WORKERS=$${KLOG_TEST_WORKERS:-0} bash tools/test.sh

# librdkafka's own broker tests (its tests/0xxx, built from source by tools/install-peers.sh), every one of them on klog
# and on Apache Kafka 4.3: one broker, one with no topic auto-creation, and 3-node clusters (about an hour).
librdkafka-suite: dev
	bash tools/install-peers.sh
	$(BIN)/pytest tests/test_librdkafka_suite.py -m "long or not long" -n 0 $(PYTEST_ARGS)

# dev's install plus the bench extra (py-spy, for the flame graphs of benches/bench_request_cost.py)
bench: $(BIN)/maturin
	$(BIN)/maturin develop --release -E test,bench
	bash tools/install-peers.sh
	$(BIN)/pytest benches -p benchmark -o addopts="" --benchmark-only

# klog vs Apache Kafka on this machine (minutes): writes docs/performance.md and docs/img/perf-*.png; then the same
# over TLS (produce and consume MB/s and CPU per GB over PLAINTEXT, SSL and SASL_SSL; TLS handshakes and SCRAM logins
# per second: the tables docs/security.md's "Costs" quotes), each paired with Kafka in its own run.
sidebyside: dev
	bash tools/bench-sidebyside.sh
	PYTHONPATH=. $(BIN)/python benches/bench_tls.py --mb 1024 --rounds 3 --kafka --engines native
	PYTHONPATH=. $(BIN)/python benches/bench_logins.py

# 3-node klog vs 3-node Apache Kafka, replication factor 3 (about 20 minutes for 3 runs)
sidebyside-cluster: dev
	bash tools/bench-sidebyside.sh --cluster 3 --runs $${RUNS:-3}

# libFuzzer runs of the native decoders (cargo-fuzz, nightly), FUZZ_SECONDS per target (default 1 h each).
fuzz:
	bash tools/fuzz.sh long $(FUZZ_SECONDS)

# Every libFuzzer target for 5 s from the committed seeds (an AddressSanitizer build first: minutes). CI's short
# run is cargo test's tests/fuzz_seeds.rs, the same checks on the seeds and seeded mutations of them.
fuzz-short:
	bash tools/fuzz.sh short

# SIGKILL a broker during log cleaning at 300 seeded random moments (CI runs 8).
chaos-compaction: dev
	KLOG_COMPACTION_CHAOS_ROUNDS=$${KLOG_COMPACTION_CHAOS_ROUNDS:-300} $(BIN)/pytest tests/test_compaction_chaos.py -q -s

# The replication simulation (leader, followers, controller; crashes, isolations, elections) over 500 seeds (CI runs 12).
chaos-replication: dev
	KLOG_REPLICATION_SIM_SEEDS=$${KLOG_REPLICATION_SIM_SEEDS:-500} $(BIN)/pytest tests/test_replication_simulation.py -q

# Seeded fault run on a real 3-node cluster (root: network namespaces; CI runs a short one, tests/test_faults_cluster.py):
#   make chaos-cluster SYSTEM=kafka|klog SEED=7 FAULTS=200 [CHAOS_ARGS="--loopback --rate 200"]
# Prints a table of anomalies; history.jsonl, history.png and result.json land in CHAOS_OUT.
chaos-cluster: dev
	bash tools/install-peers.sh
	$(BIN)/python -m klog.testing.faults.run --system $${SYSTEM:-kafka} --seed $${SEED:-1} --faults $${FAULTS:-200} \
		--out $${CHAOS_OUT:-/tmp/klog-chaos-cluster-$${SYSTEM:-kafka}-$${SEED:-1}} $(CHAOS_ARGS)

# The nightly long mode: klog under every fault kind for hours (1,000 faults, 3 s apart), any SEED; the same
# summary table and files as chaos-cluster. SYSTEM=kafka runs the same schedule against Apache Kafka.
chaos:
	$(MAKE) chaos-cluster SYSTEM=$${SYSTEM:-klog} SEED=$${SEED:-1} FAULTS=$${FAULTS:-1000} \
		CHAOS_ARGS="$${CHAOS_ARGS:---quiet 3 --max-duration 4}"

clean:
	rm -rf $(VENV) dist target
