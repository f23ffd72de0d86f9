"""Link degradation nucleus: delay, reorder, duplicate or corrupt a node's packets to some peers.

Two mechanisms, chosen per node when the fault is applied and recorded in the
journal entry (and so in nemesis.jsonl):

- `netem`: where the kernel has it (most VMs), an HTB root qdisc of ours
  (handle `c4a1:`) whose class `c4a1:2` has a netem leaf; one u32 filter per
  peer sends that peer's packets into it, everything else passes unshaped.
- `nfqueue`: where it has not (this kind of machine), an iptables rule of ours
  in the mangle table's chain CHAOS (hooked into OUTPUT) queues the packets to
  the peers to NFQUEUE queue 3146, and a small stdlib program on the node
  (nuclei/degrade_node.py) holds, copies or damages them and gives them back.
  `--queue-bypass` lets packets through untouched if that program is gone, so
  a dead degrader never becomes a partition. The mangle table runs before the
  filter table, so a partition's DROP rules still see every delayed packet.

Egress only, like tc: a fault that degrades both directions of a link puts the
nucleus on both ends. One degradation per node at a time (a second is refused,
the first stays). Undo removes the rule (or qdisc) first, then stops the
program, which accepts what it still holds, and verifies that no rule, qdisc
or program of the entry is left; it returns the program's counters.
"""
from __future__ import annotations

import json
import math
import posixpath
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nuclei.journal import Journal, JournalEntry
from nuclei.net import is_peer_address
from nuclei.remote import NucleusError, sh
from nuclei import shape
from nuclei.shape import DEFAULT_ROOTS, device

KINDS = ("delay", "reorder", "duplicate", "corrupt")
HANDLE = "c4a1"
QUEUE = 3146
CHAIN = "CHAOS"  # in the mangle table: a different chain from nuclei.net's filter-table CHAOS
MARK = 0xC4A1  # duplicates sent by the program carry it, so our rule does not queue them again
NODE_PROGRAM = Path(__file__).with_name("degrade_node.py")
MAX_MS = 60_000.0
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Degradation:
    """What happens to each packet: `kind`, and the kind's numbers (ms, jitter in ms, probability)."""

    kind: str
    ms: float = 0.0
    jitter: float = 0.0
    probability: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise NucleusError(f"degradation kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for label, value, top in (("ms", self.ms, MAX_MS), ("jitter", self.jitter, MAX_MS),
                                  ("probability", self.probability, 1.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= top:
                raise NucleusError(f"{self.kind}: {label} must be a number in [0, {top:g}], got {value!r}")
        if self.jitter > self.ms:
            raise NucleusError(f"delay: jitter ({self.jitter:g} ms) must not exceed ms ({self.ms:g})")
        if self.kind in ("reorder", "duplicate", "corrupt") and self.probability <= 0:
            raise NucleusError(f"{self.kind}: probability must be in (0, 1], got {self.probability:g}")
        if self.kind in ("delay", "reorder") and self.ms <= 0:
            raise NucleusError(f"{self.kind}: ms must be > 0, got {self.ms:g}")

    def netem(self) -> str:
        """netem's arguments for this degradation (numbers only: safe in a shell)."""
        pct = f"{self.probability * 100:.4f}%"
        if self.kind == "delay":
            return f"delay {self.ms:.3f}ms {self.jitter:.3f}ms" if self.jitter else f"delay {self.ms:.3f}ms"
        if self.kind == "reorder":
            return f"delay {self.ms:.3f}ms reorder {pct}"
        return f"{self.kind} {pct}"

    def program_args(self) -> list[str]:
        return ["--kind", self.kind, "--ms", f"{self.ms:g}", "--jitter", f"{self.jitter:g}",
                "--probability", f"{self.probability:g}"]


def state_dir(workdir: str) -> str:
    """Where a node keeps the program, its pidfiles, logs and counters."""
    return posixpath.join(workdir, "degrade")


_NETEM_PROBE = """
ip link add c4a1probe type dummy 2>/dev/null || { echo netem=unknown; exit 0; }
if tc qdisc add dev c4a1probe root netem delay 1ms 2>/dev/null; then echo netem=yes; else echo netem=no; fi
ip link del c4a1probe 2>/dev/null
"""


def mechanism(pool: Any, node: str) -> str:
    """`netem` if the node's kernel adds a netem qdisc, else `nfqueue`."""
    result = sh(pool, node, _NETEM_PROBE)
    return "netem" if result.stdout.strip() == "netem=yes" else "nfqueue"


# --- nfqueue ---------------------------------------------------------------

_BUSY = f"""
iptables -w -t mangle -S 2>/dev/null | grep -q -- '--queue-num {QUEUE} ' && exit 6; exit 0
"""

_RULES = f"""
now=$(iptables -w -t mangle -S 2>/dev/null)
echo "$now" | grep -qxF -- '-N {CHAIN}' || iptables -w -t mangle -N {CHAIN} || exit 5
echo "$now" | grep -qxF -- '-A OUTPUT -j {CHAIN}' || iptables -w -t mangle -I OUTPUT 1 -j {CHAIN} || exit 4
printf %%s %(restore)s | iptables-restore -w -n || exit 5
iptables -w -t mangle -S {CHAIN} | grep -cF -- %(needle)s
"""

# Delete the entry's rules; unhook and delete the chain once it is empty.
_DELETE_RULES = f"""
rules=$(iptables -w -t mangle -S {CHAIN} 2>/dev/null | grep -F -- %(needle)s | sed 's/^-A /-D /')
if [ -n "$rules" ]; then printf '*mangle\\n%%s\\nCOMMIT\\n' "$rules" | iptables-restore -w -n || exit 5; fi
if iptables -w -t mangle -S {CHAIN} >/dev/null 2>&1 && [ "$(iptables -w -t mangle -S {CHAIN} | grep -c '^-A ')" = 0 ]; then
  while iptables -w -t mangle -D OUTPUT -j {CHAIN} 2>/dev/null; do :; done
  iptables -w -t mangle -X {CHAIN} 2>/dev/null
fi
echo "left=$(iptables -w -t mangle -S {CHAIN} 2>/dev/null | grep -cF -- %(needle)s)"
"""

# The program is ours if /proc shows it alive (not a zombie) with our stats path in its argv.
_STOP = r"""
pf=%(pidfile)s; st=%(stats)s
pid=$(head -c 32 "$pf" 2>/dev/null | tr -dc 0-9)
alive() {
  [ -n "$pid" ] || return 1
  s=$(cat /proc/$pid/stat 2>/dev/null) || return 1
  rest=${s##*") "}; set -- $rest; [ "$1" != Z ] || return 1
  tr '\0' '\n' < /proc/$pid/cmdline 2>/dev/null | grep -qxF -- "$st"
}
alive && kill -TERM "$pid" 2>/dev/null
i=0; while alive && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
alive && kill -9 "$pid" 2>/dev/null && sleep 0.1
alive && echo "program=alive" || echo "program=gone"
echo "stats=$(cat "$st" 2>/dev/null | tr -d '\n')"
"""

_WAIT_BOUND = r"""
pid=$(head -c 32 %(pidfile)s 2>/dev/null | tr -dc 0-9)
i=0; while [ ! -s %(stats)s ] && [ $i -lt %(tries)d ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; i=$((i+1)); done
[ -s %(stats)s ] && echo bound || { echo "not bound"; tail -5 %(log)s; }
"""


def _tag(entry_id: str) -> str:
    return f"chaos-{entry_id}"


def _needle(entry_id: str) -> str:
    return shlex.quote(f"--comment {_tag(entry_id)} ")


def queue_rules(peers: Sequence[str], tag: str) -> list[str]:
    """The mangle-table rules that queue a node's packets to `peers` (not the marked duplicates)."""
    return [f"-A {CHAIN} -d {peer} -m mark ! --mark {MARK:#x} -m comment --comment {tag} "
            f"-j NFQUEUE --queue-num {QUEUE} --queue-bypass" for peer in peers]


def install(pool: Any, node: str, workdir: str) -> None:
    """Upload the degrader program to the node."""
    pool.put(node, NODE_PROGRAM, posixpath.join(state_dir(workdir), NODE_PROGRAM.name))


def _start_nfqueue(pool: Any, entry: JournalEntry, degradation: Degradation, seed: int) -> None:
    node, params = entry.node, entry.params
    if sh(pool, node, _BUSY).exited == 6:
        raise _Busy()
    install(pool, node, params["workdir"])
    program = posixpath.join(state_dir(params["workdir"]), NODE_PROGRAM.name)
    argv = ["python3", program, *degradation.program_args(), "--queue", str(QUEUE),
            "--mark", f"{MARK:#x}", "--seed", str(seed), "--stats", params["stats"]]
    sh(pool, node, f"rm -f {shlex.quote(params['stats'])}")
    pool.start_detached(node, argv, params["pidfile"], params["log"])
    bound = sh(pool, node, _WAIT_BOUND % {"stats": shlex.quote(params["stats"]), "log": shlex.quote(params["log"]),
                                          "pidfile": shlex.quote(params["pidfile"]),
                                          "tries": int(START_TIMEOUT_S / 0.05)}, timeout=START_TIMEOUT_S + 30)
    if bound.stdout.strip() != "bound":
        raise NucleusError(f"node {node}: the NFQUEUE degrader did not start: {bound.stdout.strip()[-300:]}")
    restore = shlex.quote("\n".join(["*mangle", *queue_rules(params["peers"], _tag(entry.id)), "COMMIT", ""]))
    result = sh(pool, node, _RULES % {"restore": restore, "needle": _needle(entry.id)})
    if result.exited == 6:
        raise _Busy()
    if result.exited != 0 or result.stdout.strip() != str(len(params["peers"])):
        raise NucleusError(f"node {node}: NFQUEUE rules did not take effect (exit {result.exited}): "
                           f"{(result.stderr or result.stdout).strip()[:200]}")


def _stop_nfqueue(pool: Any, entry: JournalEntry) -> dict[str, Any]:
    node, params = entry.node, entry.params
    rules = sh(pool, node, _DELETE_RULES % {"needle": _needle(entry.id)})
    stopped = sh(pool, node, _STOP % {"pidfile": shlex.quote(params["pidfile"]),
                                      "stats": shlex.quote(params["stats"])})
    facts = dict(line.split("=", 1) for line in stopped.stdout.splitlines() if "=" in line)
    if rules.exited != 0 or rules.stdout.strip() != "left=0" or facts.get("program") != "gone":
        raise NucleusError(f"node {node}: could not remove the {params.get('kind')} degradation "
                           f"({rules.stdout.strip()} program={facts.get('program')}): {rules.stderr.strip()[:200]}")
    try:
        return json.loads(facts.get("stats") or "{}")
    except ValueError:
        return {}


# --- netem -----------------------------------------------------------------

_NETEM_ADD = shape.add_script(HANDLE, "rate 100gbit", "netem %(netem)s limit 10000")
_NETEM_DELETE = shape.delete_script(HANDLE)


def _start_netem(pool: Any, entry: JournalEntry, degradation: Degradation) -> None:
    node, dev = entry.node, entry.params["dev"]
    filters = shape.peer_filters(HANDLE, dev, entry.params["peers"])
    result = sh(pool, node, _NETEM_ADD % {"dev": dev, "netem": degradation.netem(), "filters": filters,
                                          "defaults": " ".join(DEFAULT_ROOTS)})
    if result.exited == 6:
        raise _Busy()
    if result.exited != 0 or result.stdout.strip() != f"filters={len(entry.params['peers'])}":
        raise NucleusError(f"node {node}: netem did not take effect (exit {result.exited}): "
                           f"{(result.stderr or result.stdout).strip()[:200]}")


def _stop_netem(pool: Any, entry: JournalEntry) -> dict[str, Any]:
    result = sh(pool, entry.node, _NETEM_DELETE % {"dev": shlex.quote(entry.params["dev"])})
    if result.exited != 0 or result.stdout.strip() != "left=0":
        raise NucleusError(f"node {entry.node}: could not remove netem on {entry.params['dev']}: "
                           f"{(result.stdout + result.stderr).strip()[:200]}")
    return {}


# --- the nucleus -------------------------------------------------------------

class _Busy(Exception):
    """The node already has a degradation (ours or someone's qdisc)."""


def degrade(pool: Any, journal: Journal, node: str, peers: Sequence[str], degradation: Degradation,
            workdir: str, seed: int = 0, use: str | None = None) -> JournalEntry:
    """Degrade the packets `node` sends to `peers`; journaled first, verified after.

    `use` forces a mechanism (`netem` or `nfqueue`); by default netem where it works."""
    peers = list(dict.fromkeys(peers))
    if not peers:
        raise NucleusError(f"node {node}: no peers to degrade")
    for peer in peers:
        if not is_peer_address(peer):
            raise NucleusError(f"node {node}: peer address {peer!r} is not an IPv4 address or host name")
    how = use or mechanism(pool, node)
    if how not in ("netem", "nfqueue"):
        raise NucleusError(f"unknown degradation mechanism {how!r} (netem or nfqueue)")
    params: dict[str, Any] = {"peers": peers, "mechanism": how, **asdict(degradation)}
    if how == "netem":
        params["dev"] = device(pool, node, peers[0])
    else:
        stem = f"{state_dir(workdir)}/{secrets.token_hex(4)}"
        params.update(workdir=workdir, pidfile=f"{stem}.pid", stats=f"{stem}.json", log=f"{stem}.log")
    entry = journal.record("degrade", node, **params)
    try:
        if how == "netem":
            _start_netem(pool, entry, degradation)
        else:
            _start_nfqueue(pool, entry, degradation, seed)
    except _Busy:
        _undo_quietly(pool, journal, entry)
        raise NucleusError(f"node {node}: already has a link degradation or a root qdisc that is not ours; "
                           f"one link degradation per node at a time") from None
    except Exception:
        _undo_quietly(pool, journal, entry)
        raise
    return entry


def remove(pool: Any, journal: Journal, entry: JournalEntry) -> dict[str, Any]:
    """Undo a degradation, verify nothing of it is left, mark it undone; returns the program's
    counters (nfqueue) or {} (netem)."""
    if entry.params.get("mechanism") == "netem":
        counters = _stop_netem(pool, entry)
    else:
        counters = _stop_nfqueue(pool, entry)
    journal.mark_undone(entry, **({"counters": counters} if counters else {}))
    return counters


def leftovers(pool: Any, node: str, workdir: str) -> list[str]:
    """Anything of ours on the node right now: mangle rules, our chain, c4a1 qdiscs, live degraders."""
    # The bracket keeps the pattern from matching this shell's own command line.
    pattern = shlex.quote(f"degrade_node[.]py .*{state_dir(workdir)}/")
    result = sh(pool, node, f"iptables -w -t mangle -S 2>/dev/null | grep -E -- '{CHAIN}|NFQUEUE'; "
                            f"tc qdisc show 2>/dev/null | grep ' {HANDLE}: '; pgrep -af {pattern}; true")
    return [line for line in result.stdout.splitlines() if line.strip()]


def _undo_quietly(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    try:
        remove(pool, journal, entry)
    except Exception:  # noqa: BLE001 - the apply error is the one to report; heal retries
        pass

