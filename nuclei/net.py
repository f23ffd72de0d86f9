"""iptables nuclei: drop or randomly lose traffic between a node and some peers.

All rules live in one chain of ours (CHAOS), hooked first into INPUT and
OUTPUT, and each rule carries a comment naming the journal entry that made it.
Undoing an action deletes exactly its rules, so a loss and a partition can
overlap and heal in any order; a full heal flushes the chain, verifies it is
empty and unhooks it, and never touches anyone else's rules.

The nodes' sshd runs in the same namespace as the rules, so the control
node's address is never blocked: SSH must keep working during a partition.
"""
from __future__ import annotations

import shlex
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from inventory.model import is_host
from nuclei.journal import Journal, JournalEntry
from nuclei.remote import NucleusError, sh

CHAIN = "CHAOS"

# Each iptables call costs a few ms (more on a loaded machine), so every
# script runs as few as it can and verifies with one `iptables -S` at the end.
_ADD_RULES = f"""
iptables -w -N {CHAIN} 2>/dev/null
printf %%s %(restore)s | iptables-restore -w -n || exit 5
now=$(iptables -w -S) || exit 5
echo "$now" | grep -qxF -- '-A INPUT -j {CHAIN}' || iptables -w -I INPUT 1 -j {CHAIN} || exit 4
echo "$now" | grep -qxF -- '-A OUTPUT -j {CHAIN}' || iptables -w -I OUTPUT 1 -j {CHAIN} || exit 4
echo "$now" | grep -cF -- %(needle)s
"""

_DELETE_TAG = f"""
rules=$(iptables -w -S {CHAIN} 2>/dev/null | grep -F -- %(needle)s | sed 's/^-A /-D /')
if [ -n "$rules" ]; then printf '*filter\\n%%s\\nCOMMIT\\n' "$rules" | iptables-restore -w -n || exit 5; fi
echo "left=$(iptables -w -S {CHAIN} 2>/dev/null | grep -cF -- %(needle)s)"
"""

_CLEAR_CHAIN = f"""
iptables -w -F {CHAIN} 2>/dev/null
%(unhook)s
now=$(iptables -w -S) || exit 5
echo "rules=$(echo "$now" | grep -c '^-A {CHAIN} ')"
echo "chain=$(echo "$now" | grep -qxF -- '-N {CHAIN}' && echo yes || echo no)"
echo "hooks=$(echo "$now" | grep -c -- '-j {CHAIN}$')"
"""

_UNHOOK = f"""
while iptables -w -D INPUT -j {CHAIN} 2>/dev/null; do :; done
while iptables -w -D OUTPUT -j {CHAIN} 2>/dev/null; do :; done
iptables -w -X {CHAIN} 2>/dev/null
"""


def tag_of(entry: JournalEntry) -> str:
    """The comment on every rule an entry made (also how heal finds them)."""
    return f"chaos-{entry.id}"


# An IPv4 TCP segment without data is at most 20 + 60 bytes (the largest IP and TCP
# headers); a longer one, or one with PSH (set on the last segment of every write),
# carries data.
ACK_MAX_BYTES = 80


def answer_rules(peers: Sequence[str], tag: str, port: int, own: str) -> list[str]:
    """Rules that drop, at a node (`own` its address), the segments carrying data from the
    peers' `port`: the answers on its connections to them. Its requests and every bare
    acknowledgement flow, so the peers receive and act on what it sends, and nothing
    they answer arrives (`-d own`: the peers' answers to other nodes are untouched)."""
    match = f"-d {own} -p tcp --sport {port}"
    rules = []
    for peer in peers:
        for data in ("--tcp-flags PSH PSH", f"-m length --length {ACK_MAX_BYTES + 1}:65535"):
            rules.append(f"-A {CHAIN} -s {peer} {match} {data} -m comment --comment {tag} -j DROP")
    return rules


def drop_rules(peers: Sequence[str], tag: str, port: int | None = None, inbound: bool = False) -> list[str]:
    """Rules that cut a node off from the peers in both directions; with `port`, only the
    TCP connections to that port: of the peers (the node's outgoing connections), or with
    `inbound` of the node itself (the peers' connections to it)."""
    if port is None:
        into = out = ""
    elif inbound:
        into, out = f" -p tcp --dport {port}", f" -p tcp --sport {port}"
    else:
        into, out = f" -p tcp --sport {port}", f" -p tcp --dport {port}"
    rules = []
    for peer in peers:
        rules.append(f"-A {CHAIN} -s {peer}{into} -m comment --comment {tag} -j DROP")
        rules.append(f"-A {CHAIN} -d {peer}{out} -m comment --comment {tag} -j DROP")
    return rules


def loss_rules(peers: Sequence[str], probability: float, tag: str) -> list[str]:
    """Rules that drop each packet to or from the peers with the given probability."""
    statistic = f"-m statistic --mode random --probability {probability:.6f}"
    rules = []
    for peer in peers:
        rules.append(f"-A {CHAIN} -s {peer} {statistic} -m comment --comment {tag} -j DROP")
        rules.append(f"-A {CHAIN} -d {peer} {statistic} -m comment --comment {tag} -j DROP")
    return rules


def is_peer_address(text: object) -> bool:
    """An IPv4 address or a DNS host name (what an iptables -s/-d rule may name)."""
    return is_host(text) and ":" not in str(text)  # iptables, not ip6tables


def drop(pool: Any, journal: Journal, node: str, peers: Sequence[str], port: int | None = None,
         inbound: bool = False, answers: bool = False) -> JournalEntry:
    """Drop all traffic between `node` and `peers` (both directions), or with `port` only the
    TCP connections to that port of the peers (with `inbound`, the peers' connections to that
    port of the node; with `answers`, only what the peers send back on the node's connections
    to their port: its requests arrive, their answers never do); journaled first. A port cut
    may name the control node (not its SSH)."""
    if port is None:
        if answers or inbound:
            raise NucleusError(f"node {node}: a cut of {'answers' if answers else 'inbound connections'} "
                               f"needs a port")
        return _apply(pool, journal, "drop", node, peers, lambda tag: drop_rules(peers, tag))
    ssh = getattr(pool.node(node), "port", 22) if hasattr(pool, "node") else 22
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536 or port == ssh:
        raise NucleusError(f"node {node}: port must be a TCP port in [1, 65535] other than its SSH port "
                           f"{ssh}, got {port!r}")
    if answers:
        if inbound:
            raise NucleusError(f"node {node}: answers are dropped on the node's own connections, not inbound ones")
        own = pool.node(node).host
        return _apply(pool, journal, "drop", node, peers, lambda tag: answer_rules(peers, tag, port, own),
                      port=port, answers=True)
    return _apply(pool, journal, "drop", node, peers, lambda tag: drop_rules(peers, tag, port, inbound),
                  port=port, inbound=inbound)


def loss(pool: Any, journal: Journal, node: str, peers: Sequence[str], probability: float) -> JournalEntry:
    """Drop packets between `node` and `peers` at random with `probability` (0 < p <= 1)."""
    if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 < probability <= 1:
        raise NucleusError(f"loss probability must be in (0, 1], got {probability!r}")
    return _apply(pool, journal, "loss", node, peers, lambda tag: loss_rules(peers, probability, tag),
                  probability=probability)


def remove(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    """Undo a drop/loss: delete exactly its rules, verify none is left, mark it undone."""
    needle = shlex.quote(f"--comment {tag_of(entry)} ")
    result = sh(pool, entry.node, _DELETE_TAG % {"needle": needle})
    if result.exited != 0 or result.stdout.strip() != "left=0":
        raise NucleusError(f"node {entry.node}: could not remove iptables rules {tag_of(entry)}: "
                           f"{(result.stdout + result.stderr).strip()[:200]}")
    journal.mark_undone(entry)


def clear(pool: Any, node: str, unhook: bool = False) -> None:
    """Flush our chain and verify it is empty; with `unhook`, also remove the chain itself."""
    result = sh(pool, node, _CLEAR_CHAIN % {"unhook": _UNHOOK if unhook else ""})
    facts = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    healed = result.exited == 0 and facts.get("rules") == "0"
    if unhook:
        healed = healed and facts.get("chain") == "no" and facts.get("hooks") == "0"
    if not healed:
        raise NucleusError(f"node {node}: chain {CHAIN} not healed: "
                           f"{(result.stdout + result.stderr).strip()[:200]}")


def chain_rules(pool: Any, node: str) -> list[str]:
    """The rules in our chain right now (`iptables -S` lines), for checks and tests."""
    result = sh(pool, node, f"iptables -w -S {CHAIN} 2>/dev/null")
    return [line for line in result.stdout.splitlines() if line.startswith("-A ")]


def connections(pool: Any, node: str, port: int) -> set[tuple[str, int]]:
    """The peers (address, port) with an established TCP connection to the node's own `port`
    right now: a fault waits on it for a peer to (re)connect before its next step."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise NucleusError(f"node {node}: port must be a TCP port in [1, 65535], got {port!r}")
    result = sh(pool, node, f"ss -tnH state established '( sport = :{port} )'")
    if result.exited != 0:
        raise NucleusError(f"node {node}: cannot list the connections to port {port}: "
                           f"{(result.stderr or result.stdout).strip()[:200]}")
    peers = set()
    for line in result.stdout.splitlines():
        address, _, peer_port = line.split()[-1].rpartition(":")
        if peer_port.isdigit():
            peers.add((address.strip("[]").removeprefix("::ffff:"), int(peer_port)))
    return peers

def _apply(pool: Any, journal: Journal, action: str, node: str, peers: Sequence[str],
           make_rules: Any, **params: Any) -> JournalEntry:
    peers = list(dict.fromkeys(peers))
    _check_peers(pool, node, peers, spare_control=bool(params.get("port")))
    entry = journal.record(action, node, peers=peers, **params)
    rules = make_rules(tag_of(entry))
    restore = shlex.quote("\n".join(["*filter", *rules, "COMMIT", ""]))
    needle = shlex.quote(f"--comment {tag_of(entry)} ")
    script = _ADD_RULES % {"restore": restore, "needle": needle}
    result = sh(pool, node, script)
    if result.exited != 0 or result.stdout.strip() != str(len(rules)):
        _undo_quietly(pool, journal, entry)
        raise NucleusError(f"node {node}: iptables {action} rules did not take effect "
                           f"(exit {result.exited}): {(result.stderr or result.stdout).strip()[:200]}")
    return entry


def _undo_quietly(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    """After a failed apply: remove what may have been added; a later heal retries."""
    try:
        remove(pool, journal, entry)
    except Exception:  # noqa: BLE001 - the apply error is the one to report
        pass


def _check_peers(pool: Any, node: str, peers: Sequence[str], spare_control: bool = False) -> None:
    """`spare_control`: the rules cut one TCP port, never the node's SSH, so the control node may be named."""
    if not peers:
        raise NucleusError(f"node {node}: no peers to block")
    for peer in peers:
        if not is_peer_address(peer):
            raise NucleusError(f"node {node}: peer address {peer!r} is not an IPv4 address or host name")
    if spare_control:
        return
    control = control_address(pool, node)
    if control in peers:
        raise NucleusError(f"node {node}: refusing to block {control}, the control node's address "
                           f"(SSH to the nodes must keep working)")


_control_addresses: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_control_lock = threading.Lock()


def control_address(pool: Any, node: str) -> str:
    """The address the node sees our SSH connection come from (cached per pool)."""
    with _control_lock:
        known = _control_addresses.setdefault(pool, {})
        if node in known:
            return known[node]
    result = pool.run(node, 'echo "${SSH_CLIENT%% *}"', timeout=30, check=False, sudo=False)
    address = result.stdout.strip()
    if result.exited != 0 or not address:
        raise NucleusError(f"node {node}: cannot tell the control node's address (SSH_CLIENT unset)")
    with _control_lock:
        known[node] = address
    return address
