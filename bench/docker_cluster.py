"""How long the docker provider takes: node image (cold and cached), cluster up and down (seconds).

    .venv/bin/python bench/docker_cluster.py                  # cached image, 3 and 5 nodes, 3 rounds
    .venv/bin/python bench/docker_cluster.py --cold           # first removes the image and the .deb cache

Cold: debootstrap downloads and installs the packages, the root file system is
imported. Cached: the tag is already in the engine. Up: network, containers,
sshd answering, inventory written. Needs root and a Docker engine
(`CHAOS_DOCKER=1 bash scripts/setup.sh`). Prints numbers only; nothing is
asserted. Runs in a CHAOS_HOME of its own.
"""
from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from inventory import docker, docker_image  # noqa: E402


def seconds(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def bench_image(client, cold: bool) -> None:
    if cold:
        docker_image.remove_images(client)
        print(f"image cold   {seconds(lambda: docker_image.build_image(client)):7.1f} s (debootstrap + import)")
    print(f"image cached {seconds(lambda: docker_image.build_image(client)):7.3f} s")


def bench_cluster(size: int, rounds: int, home: Path) -> None:
    ups, downs = [], []
    for _ in range(rounds):
        name = f"bench{os.getpid()}-{secrets.token_hex(2)}"
        try:
            ups.append(seconds(lambda: docker.up(name, size, home=home, persistent=False)))
        finally:
            downs.append(seconds(lambda: docker.down(name, home=home)))
    print(f"{size} nodes: up median {statistics.median(ups):5.1f} s (max {max(ups):5.1f}), "
          f"down median {statistics.median(downs):5.1f} s (max {max(downs):5.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, action="append", help="cluster size (repeatable; default 3 and 5)")
    parser.add_argument("--rounds", type=int, default=3, help="up/down rounds per size")
    parser.add_argument("--cold", action="store_true", help="remove the image and .deb cache first")
    args = parser.parse_args()
    client = docker.engine()
    bench_image(client, args.cold)
    with tempfile.TemporaryDirectory(prefix="chaos-bench-") as home:
        for size in args.nodes or [3, 5]:
            bench_cluster(size, args.rounds, Path(home))


if __name__ == "__main__":
    main()
