"""`chaos run --provider docker`: a whole chaos run on containers, and a harness killed mid-run.

Both tests go through the `chaos` command as a user would, in a CHAOS_HOME
of their own, and end by showing that no container, network, namespace or
state directory of theirs is left. CI's short form (CHAOS_LONG=short): a 20 s
run with 5 s fault intervals; the full form runs 60 s with 15 s intervals.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from inventory import docker, docker_image
from inventory.netns import chaos_home
from support.docker import CHAOS, chaos, engine_or_skip, leftovers

SHORT = os.environ.get("CHAOS_LONG") == "short"
DURATION, INTERVAL, RECOVERY = (20, 5, 5) if SHORT else (60, 15, 15)

pytestmark = [pytest.mark.long, pytest.mark.root]


DOCKER_NETNS = Path("/var/run/docker/netns")  # the engine's handles on its containers' namespaces


def container_namespaces() -> set[str]:
    return set(os.listdir(DOCKER_NETNS)) if DOCKER_NETNS.is_dir() else set()


# dockerd (libnetwork) removes the namespace files of deleted sandboxes in a garbage
# collection that runs every 60 s, so a removed container's file may stay that long.
DOCKER_NETNS_GC_S = 60.0


def namespaces_left_over(before: set[str], timeout_s: float = DOCKER_NETNS_GC_S + 15) -> set[str]:
    """Container namespaces not there before, once dockerd's next collection of the
    namespace files of removed containers has had time to run."""
    deadline = time.monotonic() + timeout_s
    while (left := container_namespaces() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines() if line.strip()]


def test_a_queue_run_with_a_kill_and_a_partition_on_four_containers_gets_a_verdict_and_leaves_nothing(tmp_path):
    client = engine_or_skip()
    home, store = tmp_path / "home", tmp_path / "store"
    namespaces = container_namespaces()
    result = chaos("run", "--provider", "docker", "--nodes", "4", "--profile", "dledger-3", "--workload", "queue",
                   "--fault", "random-kill", "--fault", "random-partition", "--time", str(DURATION),
                   "--interval", str(INTERVAL), "--recovery", str(RECOVERY), "--seed", "1515",
                   "--store", str(store), "--quiet", home=home, timeout=900)
    # dledger-3 is expected safe: the verdict must be valid (exit 0), not just present.
    assert result.returncode == 0, result.stderr[-2000:]
    assert "verdict: valid (exit 0)" in result.stdout
    run_dir = Path(result.stdout.split("store: ", 1)[1].split()[0])
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["status"] == "complete"
    assert run_json["cluster"]["provider"] == "docker" and run_json["inventory"]["kind"] == "docker"
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True and results["checkers"]["queue"]["valid"] is True
    started = [json.loads(line)["f"] for line in (run_dir / "nemesis.jsonl").read_text().splitlines()
               if '"phase":"start"' in line]
    assert any("kill" in f for f in started) and any("partition" in f for f in started), started
    entries = journal(run_dir)
    applied = {e["id"] for e in entries if e["event"] == "apply"}
    assert applied and applied == {e["id"] for e in entries if e["event"] == "undo"}
    assert not leftovers(client, home)
    assert not (home / "docker").exists() or not any((home / "docker").iterdir())
    assert not namespaces_left_over(namespaces)


def test_a_harness_killed_mid_run_is_healed_by_chaos_heal_and_removed_by_chaos_down(tmp_path):
    client = engine_or_skip()
    home, store = tmp_path / "home", tmp_path / "store"
    proc = subprocess.Popen([CHAOS, "run", "--provider", "docker", "--nodes", "4", "--profile", "dledger-3",
                             "--fault", "random-partition", "--time", "120", "--interval", "2", "--no-check",
                             "--store", str(store), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CHAOS_HOME": str(home)})
    try:
        run_dir = _wait_for_a_partition(store, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert leftovers(client, home), "the killed harness should have left its containers"
    assert _our_rules(client, home), "the killed harness should have left a partition applied"

    healed = chaos("heal", "--store", str(run_dir), home=home)
    assert healed.returncode == 0, healed.stderr
    assert not _our_rules(client, home)

    removed = chaos("down", "--provider", "docker", home=home)
    assert removed.returncode == 0, removed.stderr
    assert "has exited" in removed.stdout
    assert not leftovers(client, home)
    assert not any((home / "docker").iterdir())


def _wait_for_a_partition(store: Path, proc: subprocess.Popen) -> Path:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for nemesis in store.glob("*/runs/*/nemesis.jsonl"):
            if '"phase":"start"' in nemesis.read_text():
                return nemesis.parent
        if proc.poll() is not None:
            pytest.fail(f"chaos run ended before any fault: {proc.stderr.read()[-2000:]}")
        time.sleep(0.3)
    pytest.fail("no partition started within 300 s")


def _our_rules(client, home: Path) -> list[str]:
    """DROP rules of the nuclei's iptables chain, in every container of `home`."""
    rules = []
    for container in docker.owned(client, home)["containers"]:
        code, output = container.exec_run(["iptables", "-w", "-S"])
        assert code == 0, f"iptables in {container.name}: {output.decode(errors='replace')}"
        rules += [line for line in output.decode().splitlines() if "-j DROP" in line]
    return rules


def test_down_with_image_removes_the_node_images_and_the_package_cache():
    """Last in the docker tests: it removes the cached image (and the .deb cache of this
    CHAOS_HOME, where the other tests built it) that the others use."""
    client = engine_or_skip()
    docker_image.build_image(client)  # cached unless this test runs alone
    (docker_image.build_dir() / "debs").mkdir(parents=True, exist_ok=True)
    result = chaos("down", "--provider", "docker", "--image", home=chaos_home())
    assert result.returncode == 0, result.stderr
    assert f"image {docker_image.image_tag(docker_image.DEBOOTSTRAP)}: removed" in result.stdout
    assert f"build cache {docker_image.build_dir()}: removed" in result.stdout
    assert not client.images.list(filters={"label": f"{docker.LABEL_ROLE}=image"})
    assert not docker_image.build_dir().exists()
