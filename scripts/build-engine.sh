#!/usr/bin/env bash
# Compiles the Java linearizability engine with plain javac (no Maven, no
# network) into build/knossos-engine.jar; skipped when the sources are unchanged.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/checkers/knossos/java"
out="$root/build"
jar="$out/knossos-engine.jar"
[ -d "$src" ] || exit 0
mapfile -t sources < <(find "$src" -name '*.java' | sort)
[ "${#sources[@]}" -gt 0 ] || exit 0
want=$(cat "${sources[@]}" | sha256sum | cut -d' ' -f1)
if [ -f "$jar" ] && [ "$(cat "$out/.engine-hash" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
# chaos.events.EventDecoder is a Spark SQL function: it compiles against pyspark's jars
python=$root/.venv/bin/python
jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
echo "[setup] compiling the linearizability engine and the event decoder"
rm -rf "$out/classes"
mkdir -p "$out/classes"
javac -nowarn --release 17 -encoding UTF-8 -cp "$jars/*" -d "$out/classes" "${sources[@]}"
jar cf "$jar" -C "$out/classes" .
echo "$want" > "$out/.engine-hash"
