#!/usr/bin/env bash
# Assembles an Apache RocketMQ 5.x release from Maven Central into build/rocketmq-<version>/:
# lib/ (the module jars and their dependencies, as the binary release's lib/) and conf/ (the
# logback configurations the modules ship). The release is the one pinned in
# scripts/rocketmq/pom.xml, or the version given as the first argument (the same pom with its
# rocketmq.version set to it). Idempotent: a second call for one version only checks a stamp
# (offline, instant); two calls at once for one version wait for each other.
# Prints the release directory on its last line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pom="$root/scripts/rocketmq/pom.xml"
pinned=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$pom")
version=${1:-$pinned}
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "[rocketmq] not a release version: '$version' (e.g. 5.3.3)" >&2; exit 2; }
home="$root/build/rocketmq-$version"
# The stamp is the digest of the pom as resolved: for the pinned version, the pom itself.
want=$(sed "s:<rocketmq.version>$pinned</rocketmq.version>:<rocketmq.version>$version</rocketmq.version>:" "$pom" \
  | sha256sum | cut -d' ' -f1)

if [ -f "$home/.stamp" ] && [ "$(cat "$home/.stamp")" = "$want" ]; then
  echo "$home"
  exit 0
fi
command -v java >/dev/null || { echo "[rocketmq] no JDK: 'java' is not on PATH (install openjdk-17-jdk-headless)" >&2; exit 2; }
command -v mvn >/dev/null || { echo "[rocketmq] no Maven: 'mvn' is not on PATH (install maven)" >&2; exit 2; }
mkdir -p "$root/build"
exec 9>"$root/build/.rocketmq-$version.lock"
flock 9
if [ -f "$home/.stamp" ] && [ "$(cat "$home/.stamp")" = "$want" ]; then   # resolved while we waited
  echo "$home"
  exit 0
fi

echo "[rocketmq] resolving Apache RocketMQ $version from Maven Central into build/rocketmq-$version" >&2
tmp="$home.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/lib" "$tmp/conf"
if ! mvn -q -B -f "$pom" -Drocketmq.version="$version" dependency:copy-dependencies -DoutputDirectory="$tmp/lib" \
     >"$tmp/mvn.log" 2>&1; then
  echo "[rocketmq] Maven could not resolve RocketMQ $version (not on Maven Central, or the registry is unreachable): $(grep -m1 -E 'ERROR' "$tmp/mvn.log" | cut -c1-240 || tail -n1 "$tmp/mvn.log")" >&2
  rm -rf "$tmp"
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
