#!/usr/bin/env bash
# Install the real Kafka peers the tests drive: kcat (Debian) and Apache Kafka's jars (Maven
# Central) into .cache/kafka/libs. Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kcat >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq kcat >/dev/null
fi

libs=.cache/kafka/libs
stamp=$libs/.pom-$(sha256sum tools/kafka/pom.xml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  rm -rf "$libs"; mkdir -p "$libs"
  mvn -q -B -f tools/kafka/pom.xml dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$PWD/$libs"
  touch "$stamp"
fi
echo "peers: $(kcat -V 2>&1 | grep -o "librdkafka [0-9.]*" | head -1 || echo kcat), $(ls $libs/*.jar | wc -l) Kafka jars in $libs"
