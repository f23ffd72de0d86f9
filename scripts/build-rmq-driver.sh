#!/usr/bin/env bash
# Compiles the RocketMQ client driver (sut/rocketmq/java) with plain javac against the
# pinned release's jars (scripts/fetch-rocketmq.sh) into build/rmq-driver.jar; skipped
# when the sources and the release are unchanged.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/sut/rocketmq/java"
out="$root/build"
jar="$out/rmq-driver.jar"
home=$(bash "$root/scripts/fetch-rocketmq.sh")
mapfile -t sources < <(find "$src" -name '*.java' | sort)
[ "${#sources[@]}" -gt 0 ] || exit 0
want=$( (cat "${sources[@]}"; cat "$home/.stamp") | sha256sum | cut -d' ' -f1)
if [ -f "$jar" ] && [ "$(cat "$out/.rmq-driver-hash" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "[setup] compiling the RocketMQ client driver"
# Built aside and renamed into place: a driver JVM already running keeps reading the jar
# it opened (the old inode), never a half-written one.
classes=$(mktemp -d "$out/.rmq-driver-classes.XXXXXX")
trap 'rm -rf "$classes" "$jar.part"' EXIT
javac -nowarn -Xlint:none --release 17 -encoding UTF-8 -cp "$home/lib/*" -d "$classes" "${sources[@]}" 2>&1 \
  | grep -v '^Note: ' >&2 || true
[ -n "$(find "$classes" -name Driver.class)" ] || { echo "[setup] the RocketMQ client driver did not compile" >&2; exit 2; }
jar cf "$jar.part" -C "$classes" .
mv -f "$jar.part" "$jar"
echo "$want" > "$out/.rmq-driver-hash"
