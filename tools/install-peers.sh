#!/usr/bin/env bash
# Install the real peers the tests drive: kcat, prometheus, chromium and nftables (Debian), Apache Kafka's jars (Maven
# Central) into .cache/kafka/libs, kafkajs (npm), Sarama (Go modules), kafka-python's tests (PyPI sdist) and
# librdkafka's test suite (built from its source release). Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."

# kcat; Prometheus (the metrics test scrapes a broker with it); Chromium and its driver (the web console's
# browser tests drive it with Playwright, which never downloads a browser of its own).
missing=""
command -v kcat >/dev/null 2>&1 || missing="$missing kcat"
command -v prometheus >/dev/null 2>&1 || missing="$missing prometheus"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium chromium-driver"
# nftables: the fault suite's network partitions and packet loss between nodes in network namespaces.
command -v nft >/dev/null 2>&1 || missing="$missing nftables"
# libfaketime: the fault suite's clock-offset fault (LD_PRELOAD into one node's process, never the machine's clock).
command -v faketime >/dev/null 2>&1 || missing="$missing faketime libfaketime"
if [ -n "$missing" ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "peers: apt-get install$missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

libs=.cache/kafka/libs
stamp=$libs/.pom-$(cat tools/kafka/pom.xml tools/kafka/tools-log4j2.properties | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  rm -rf "$libs"; mkdir -p "$libs"
  mvn -q -B -f tools/kafka/pom.xml dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$PWD/$libs"
  # The tools' logging config, found by Log4j 2 on the classpath (a libs/* classpath only takes jars).
  python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as jar:
    jar.write(sys.argv[2], "log4j2.properties")' "$libs/klog-tools-log4j2.jar" tools/kafka/tools-log4j2.properties
  touch "$stamp"
fi
# kafkajs (npm, tests/js/package.json) and the Go modules of Sarama and franz-go (tests/go/go.mod): the transactional
# clients tests/test_transactions_kafkajs_sarama.py and tests/test_franz_go_suite.py run (node and go come
# with the machine)
if [ ! -f tests/js/node_modules/.package-lock.json ] || [ tests/js/package-lock.json -nt tests/js/node_modules/.package-lock.json ]; then
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error >/dev/null
fi
(cd tests/go && go mod download)
# kafka-python's own integration tests (its PyPI sdist, pinned and sha256-checked): tests/test_kafka_python_suite.py
python3 tools/fetch-kafka-python-suite.py >/dev/null
# librdkafka's own test suite (tests/test_librdkafka_suite.py), built from its pinned source release into
# .cache/librdkafka/<version> (minutes, once per version)
bash tools/install-librdkafka-tests.sh
echo "peers: $(kcat -V 2>&1 | grep -o "librdkafka [0-9.]*" | head -1 || echo kcat), $(ls $libs/*.jar | wc -l) Kafka jars in $libs, $(prometheus --version 2>&1 | head -1 | cut -d' ' -f1-3), $(chromium --version 2>/dev/null)"
