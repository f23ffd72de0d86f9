#!/usr/bin/env bash
# Installs everything the project needs, idempotently: Debian packages, a
# virtualenv with the Python dependencies, the JVM linearizability engine, and
# the class archive of Spark's driver JVM, and the pinned Apache RocketMQ release.
# A second call with nothing changed takes about a second.
#
# The docker provider (chaos up --provider docker) needs a Docker engine:
# `CHAOS_DOCKER=1 bash scripts/setup.sh` (or `bash scripts/setup.sh --docker`)
# also installs Debian's docker.io and debootstrap and starts the engine.
set -euo pipefail

want_docker=${CHAOS_DOCKER:-}
for arg in "$@"; do
  case "$arg" in
    --docker) want_docker=1 ;;
    *) echo "[setup] unknown option $arg (known: --docker)" >&2; exit 3 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv="$root/.venv"
stamp_dir="$venv/.stamps"

say() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------
# One place for the list: every package a test or a run needs on this machine.
APT_PACKAGES=(
  openssh-server openssh-client iptables iproute2 procps psmisc
  openjdk-17-jdk-headless maven
  chromium
  fuse3
  libfaketime faketime
)
if [ -n "$want_docker" ]; then
  APT_PACKAGES+=(docker.io debootstrap)
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "[setup] missing Debian packages: ${missing[*]}; run this script as root" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- virtualenv and Python dependencies ------------------------------------
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  say "creating virtualenv in .venv"
  "$python" -m venv "$venv"
fi
mkdir -p "$stamp_dir"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
have=$(cat "$stamp_dir/pip" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  say "installing Python dependencies (first time takes a few minutes: pyspark)"
  "$venv/bin/pip" install -q --upgrade pip >/dev/null
  "$venv/bin/pip" install -q -e ".[test]"
  echo "$want" > "$stamp_dir/pip"
fi

# --- the JVM linearizability engine ------------------------------------------
bash "$root/scripts/build-engine.sh"

# --- the driver JVM's class-data archive (checkers/spark/class_data_archive.py) ---------
# Spark's classes, mapped by every later driver JVM instead of loaded one by one
# (a session then starts sooner). One per pyspark version and JDK; a
# failure only costs that time, so it does not stop the set-up.
archive=$("$venv/bin/python" -c 'from checkers.spark.session import class_archive; print(class_archive())')
if [ ! -f "$archive" ]; then
  say "building the driver JVM's class archive (about a minute, once)"
  "$venv/bin/python" -m checkers.spark.class_data_archive || say "no class archive: Spark sessions start about 2 s slower"
fi

# --- Apache RocketMQ for the rmq-* profiles (scripts/rocketmq/pom.xml) ---------
# Resolved from Maven Central once; later calls check a stamp and stay offline.
bash "$root/scripts/fetch-rocketmq.sh" >/dev/null
# The client driver the workloads use on rmq-* profiles (sut/rocketmq/java).
bash "$root/scripts/build-rmq-driver.sh"

# --- the Docker engine (only when asked for) ----------------------------------
if [ -n "$want_docker" ]; then
  bash "$root/scripts/start-docker.sh" "$venv/bin/python"
fi

say "ready: $venv"
