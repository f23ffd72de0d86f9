"""Helpers for the nuclei/faults cluster tests: target processes and probes from inside nodes.

The SUT plugs in its own processes later; until then every node runs one
small TCP server (accepts and closes connections), started detached with a
pidfile under the node's workdir like the deployer's processes.
"""
from __future__ import annotations

import json
import random
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import faults
import nuclei
from faults.targets import normalize_roles
from inventory import Inventory, Pool
from nuclei.net import CHAIN
from nuclei.process import Proc, inspect

PORT = 7100
# A TCP server that accepts and closes: enough to prove a node reachable.
SERVER = ("import socket, sys\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(128)\n"
          "while True:\n    c, _ = s.accept(); c.close()\n")
# Tries every peer at once from inside a node; prints the reachable ones.
PROBE = ("import json, socket, sys, threading\n"
         "peers, port, timeout = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])\n"
         "ok = []\n"
         "def probe(ip):\n"
         "    try:\n"
         "        socket.create_connection((ip, port), timeout=timeout).close(); ok.append(ip)\n"
         "    except OSError:\n"
         "        pass\n"
         "ts = [threading.Thread(target=probe, args=(ip,)) for ip in peers]\n"
         "[t.start() for t in ts]; [t.join() for t in ts]\n"
         "print(json.dumps(sorted(ok)))\n")


def server_proc(node: Any, role: str = "broker") -> Proc:
    argv = ("python3", "-c", SERVER, node.host, str(PORT), node.workdir)
    return Proc(node=node.name, name="server", role=role, pidfile=f"{node.workdir}/server.pid",
                       argv=argv, logfile=f"{node.workdir}/server.log")


def start_proc(pool: Pool, proc: Proc) -> int:
    return pool.start_detached(proc.node, list(proc.argv), proc.pidfile, proc.logfile)


def start_servers(inventory: Inventory, pool: Pool) -> dict[str, Proc]:
    """One server per node; waits until every node accepts connections."""
    procs = {node.name: server_proc(node) for node in inventory.nodes}
    for proc in procs.values():
        start_proc(pool, proc)
    wait_until(lambda: all(len(v) == len(procs) - 1 for v in reachability(inventory, pool).values()),
               "servers did not come up")
    return procs


def stop_servers(pool: Pool, procs: dict[str, Proc]) -> None:
    for proc in procs.values():
        pool.run(proc.node, f"kill -9 $(cat {shlex.quote(proc.pidfile)}) 2>/dev/null; rm -f "
                            f"{shlex.quote(proc.pidfile)}", check=False)


def reachability(inventory: Inventory, pool: Pool, timeout: float = 1.5) -> dict[str, set[str]]:
    """For each node, the peers it can open a TCP connection to (measured inside the node)."""
    by_ip = {node.host: node.name for node in inventory.nodes}

    def probe(node: Any) -> set[str]:
        peers = [n.host for n in inventory.nodes if n.name != node.name]
        out = pool.run(node.name, ["python3", "-c", PROBE, json.dumps(peers), str(PORT), str(timeout)],
                       timeout=30).stdout
        return {by_ip[ip] for ip in json.loads(out)}

    results = nuclei.in_parallel(probe, inventory.nodes)
    return {node.name: seen for node, seen in zip(inventory.nodes, results)}


def views_measured(inventory: Inventory, pool: Pool) -> dict[str, frozenset[str]]:
    """Like faults.grudge.views, but measured: a pair is connected only if both directions work."""
    reach = reachability(inventory, pool)
    return {a: frozenset([a] + [b for b in reach[a] if a in reach[b]]) for a in reach}


def proc_state(pool: Pool, proc: Proc) -> str | None:
    """The /proc state letter of the process the pidfile names, or None if it is not running."""
    states = [s for s in inspect(pool, proc) if s.state != "Z"]
    return states[0].state if states else None


def wait_until(condition: Callable[[], bool], message: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.1)


def make_context(inventory: Inventory, pool: Pool, run_dir: Path, procs: dict[str, Proc],
                 leader: str | None = None, roles: Sequence[str] | None = None,
                 seed: int = 1) -> faults.FaultContext:
    """A FaultContext wired as the run lifecycle will wire it, with the test servers as processes."""
    log = run_dir / "nemesis.jsonl"

    def emit(event: dict[str, Any]) -> None:
        with log.open("a") as f:
            f.write(json.dumps(event) + "\n")

    return faults.FaultContext(
        pool=pool, nodes=list(inventory.nodes), rng=random.Random(seed),
        journal=nuclei.Journal(run_dir / "journal.jsonl"),
        processes=lambda node: [procs[node]] if node in procs else [],
        start_process=lambda proc: start_proc(pool, proc),
        leader=lambda role: leader, target_roles=normalize_roles(roles), emit=emit)


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "nemesis.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def chain_is_gone(pool: Pool, node: str) -> bool:
    rules = pool.run(node, "iptables -w -S", timeout=30).stdout
    return CHAIN not in rules
