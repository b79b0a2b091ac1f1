#!/usr/bin/env bash
# Fetch Spark's Kafka source (org.apache.spark:spark-sql-kafka-0-10_2.13) matching the pyspark
# installed in the given Python (default .venv/bin/python) into .cache/spark-kafka/<version>/ and
# print that directory. Only the connector and the jars pyspark lacks are copied (pyspark ships
# Spark, Scala, Hadoop client, lz4/snappy/zstd). Idempotent: a finished fetch is reused.
# SPARK_KAFKA_VERSION overrides the version (Maven Central may not carry the newest release yet;
# the connector of the previous minor release usually works).
#   usage: tools/spark/fetch-spark-kafka.sh [python]
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${1:-.venv/bin/python}
installed=$("$py" -c 'import pyspark; print(pyspark.__version__)')
if [ -n "${SPARK_KAFKA_VERSION:-}" ]; then
  candidates=$SPARK_KAFKA_VERSION
else
  # the installed version, else the previous minor release's first patch
  IFS=. read -r major minor _ <<<"$installed"
  candidates="$installed"
  [ "$minor" -gt 0 ] && candidates="$candidates $major.$((minor - 1)).0"
fi
for version in $candidates; do
  out=.cache/spark-kafka/$version
  if [ ! -f "$out/.done" ]; then
    rm -rf "$out"; mkdir -p "$out"
    if ! mvn -q -B -s tools/spark/settings.xml -f tools/spark/pom.xml dependency:copy-dependencies \
        -Dspark.version="$version" -DincludeScope=runtime -DoutputDirectory="$PWD/$out" \
        -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
        >"$out.log" 2>&1; then
      echo "spark-sql-kafka-0-10 $version not fetched (see $out.log)" >&2
      rm -rf "$out"
      continue
    fi
    touch "$out/.done"
  fi
  echo "$PWD/$out"
  exit 0
done
echo "no spark-sql-kafka-0-10 connector for pyspark $installed on Maven Central (tried: $candidates)" >&2
exit 1
