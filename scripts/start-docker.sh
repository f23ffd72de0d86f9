#!/usr/bin/env bash
# Starts Debian's Docker engine unless it already answers; idempotent.
# Called by scripts/setup.sh with CHAOS_DOCKER=1 or --docker. Uses the init
# script when it works, else start-stop-daemon (containers and CI machines
# without systemd, where the init script's `ulimit -n 1048576` is refused).
set -euo pipefail
python=${1:-python3}

answers() {
  "$python" -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1
}

if answers; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "[setup] the Docker engine is not running; start it as root (bash scripts/setup.sh --docker)" >&2
  exit 1
fi
echo "[setup] starting the Docker engine"
service docker start >/dev/null 2>&1 || true
if ! answers; then
  start-stop-daemon --start --background --no-close --oknodo \
    --pidfile /var/run/docker-ssd.pid --make-pidfile \
    --exec /usr/sbin/dockerd -- -p /var/run/docker.pid >>/var/log/docker.log 2>&1
fi
for _ in $(seq 1 60); do
  if answers; then
    exit 0
  fi
  sleep 0.5
done
echo "[setup] the Docker engine did not come up in 30 s; see /var/log/docker.log" >&2
exit 1
