#!/usr/bin/env bash
# Build librdkafka's own integration test suite (tests/test-runner, the tests/0xxx programs) from its source release
# into .cache/librdkafka/<version>/, for tests/test_librdkafka_suite.py. The source comes from Debian's package archive
# (the .orig tarball is librdkafka's GitHub release), checked against its pinned sha256; snapshot.debian.org keeps every
# version, so it is the fallback. Skipped when that version's build is already there. Called by tools/install-peers.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

version=2.14.2
sha256=4d53568c13717b167d12c7b2a0fe12aeb5d6bfe02de53df5b68f86d870a81b33
tarball=librdkafka_${version}.orig.tar.gz
urls=(
  "http://deb.debian.org/debian/pool/main/libr/librdkafka/$tarball"
  "https://snapshot.debian.org/archive/debian/20260101T000000Z/pool/main/libr/librdkafka/$tarball"
)
cache=.cache/librdkafka
dest=$cache/$version
[ -x "$dest/tests/test-runner" ] && exit 0

# Build dependencies: TLS (SCRAM and SSL), zlib and zstd compression, RapidJSON (test 0053 checks the statistics
# JSON against its schema with it); LZ4 is built in, GSSAPI and OIDC (curl) are left out (configure --disable-*), so
# libsasl2 and libcurl are not needed.
missing=""
for pkg in build-essential libssl-dev zlib1g-dev libzstd-dev rapidjson-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "librdkafka tests: apt-get install$missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

mkdir -p "$cache"
if [ ! -f "$cache/$tarball" ] || ! echo "$sha256  $cache/$tarball" | sha256sum -c --quiet - >/dev/null 2>&1; then
  rm -f "$cache/$tarball"
  for url in "${urls[@]}"; do
    curl -fsSL --retry 3 -o "$cache/$tarball.part" "$url" && break
    echo "librdkafka tests: $url failed" >&2
  done
  echo "$sha256  $cache/$tarball.part" | sha256sum -c --quiet -
  mv "$cache/$tarball.part" "$cache/$tarball"
fi

build=$cache/build-$version
rm -rf "$build"; mkdir -p "$build"
tar -xzf "$cache/$tarball" -C "$build" --strip-components=1
echo "librdkafka tests: building $version (a few minutes)"
log=$build/build.log
if ! (cd "$build" && ./configure --disable-gssapi --disable-curl --disable-lz4-ext \
        && make -j"$(nproc)" libs && make -C tests -j"$(nproc)" build) >"$log" 2>&1; then
  tail -50 "$log"
  echo "librdkafka tests: build failed (log: $log)" >&2
  exit 1
fi
rm -rf "$dest"
mv "$build" "$dest"
