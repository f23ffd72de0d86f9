#!/usr/bin/env bash
# Assembles the pinned Apache RocketMQ release (scripts/rocketmq/pom.xml) from Maven
# Central into build/rocketmq-<version>/: lib/ (the module jars and their dependencies,
# as the binary release's lib/) and conf/ (the logback configurations the modules ship).
# Idempotent: a second call with the pom unchanged only checks a stamp (offline, instant).
# Prints the release directory on its last line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pom="$root/scripts/rocketmq/pom.xml"
version=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$pom")
home="$root/build/rocketmq-$version"
want=$(sha256sum "$pom" | cut -d' ' -f1)

if [ -f "$home/.stamp" ] && [ "$(cat "$home/.stamp")" = "$want" ]; then
  echo "$home"
  exit 0
fi
command -v java >/dev/null || { echo "[rocketmq] no JDK: 'java' is not on PATH (install openjdk-17-jdk-headless)" >&2; exit 2; }
command -v mvn >/dev/null || { echo "[rocketmq] no Maven: 'mvn' is not on PATH (install maven)" >&2; exit 2; }

echo "[rocketmq] resolving Apache RocketMQ $version from Maven Central into build/rocketmq-$version" >&2
tmp="$home.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/lib" "$tmp/conf"
if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$tmp/lib" >"$tmp/mvn.log" 2>&1; then
  echo "[rocketmq] Maven could not resolve RocketMQ $version (registry unreachable?): $(grep -m1 -E 'ERROR' "$tmp/mvn.log" || tail -n1 "$tmp/mvn.log")" >&2
  exit 2
fi
# The release's conf/ carries the logback configurations that the modules' jars ship.
for module in broker namesrv controller; do
  (cd "$tmp/conf" && jar xf "$tmp/lib/rocketmq-$module-$version.jar" "rmq.$module.logback.xml")
done
[ -n "$(ls "$tmp/lib"/rocketmq-broker-*.jar 2>/dev/null)" ] || { echo "[rocketmq] no broker jar was resolved" >&2; exit 2; }
echo "$want" > "$tmp/.stamp"
rm -rf "$home"
mv "$tmp" "$home"
echo "$home"
