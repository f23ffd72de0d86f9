"""tc nucleus: limit the bandwidth from a node to some peers, leaving other traffic alone.

An HTB qdisc of ours (handle `c4a0:`) replaces the root qdisc of the interface
that routes to the peers: class `c4a0:1` (the default) is unlimited, class
`c4a0:2` has the configured rate, and one u32 filter per peer sends packets for
that peer into it. Traffic to anyone else, the control node's clients and SSH
included, stays in the unlimited class. HTB and u32 work inside a network
namespace on kernels without netem (checked here), unlike `prio`.

Only egress is shaped: a fault that must slow both directions of a link puts
the nucleus on both ends. One shaping action per interface at a time: a node
whose root qdisc is already ours (or anyone else's non-default one) is refused
rather than silently replaced. Undo deletes our root qdisc and verifies that
none of ours is left; it never deletes a qdisc with another handle.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from nuclei.journal import Journal, JournalEntry
from nuclei.net import is_peer_address
from nuclei.remote import NucleusError, sh

HANDLE = "c4a0"
# tc's own rate syntax, restricted to what a user should write: 1mbit, 500kbit, 10mbps.
RATE = re.compile(r"[1-9][0-9]{0,6}(?:bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)")
# Root qdiscs a fresh interface may have; anything else belongs to someone.
DEFAULT_ROOTS = ("noqueue", "pfifo_fast", "fq_codel", "mq", "pfifo", "fq")

_DEVICE = """
dev=$(ip -o route get %(peer)s 2>/dev/null | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')
[ -n "$dev" ] || exit 3
echo "dev=$dev"
"""

def add_script(handle: str, limited_class: str, leaf: str = "") -> str:
    """The shell script that puts an HTB root of `handle` on %(dev)s: class 1 (the default)
    unlimited, class 2 with the tc class arguments `limited_class` and an optional leaf
    qdisc, then %(filters)s; a root qdisc that is ours or not a default one is refused
    (exit 6). It prints how many filters lead into class 2."""
    leaf_line = f"tc qdisc add dev %(dev)s parent {handle}:2 handle {int(handle, 16) + 1:x}: {leaf} || exit 5\n" \
        if leaf else ""
    return f"""
root=$(tc qdisc show dev %(dev)s root 2>/dev/null | head -1)
case "$root" in
  "qdisc htb {handle}:"*) echo "busy=ours"; exit 6;;
  *" 0: root"*|"") ;;
  *) kind=$(echo "$root" | cut -d' ' -f2)
     case " %(defaults)s " in *" $kind "*) ;; *) echo "busy=$kind"; exit 6;; esac;;
esac
tc qdisc replace dev %(dev)s root handle {handle}: htb default 1 r2q 100000 || exit 5
tc class add dev %(dev)s parent {handle}: classid {handle}:1 htb rate 100gbit || exit 5
tc class add dev %(dev)s parent {handle}: classid {handle}:2 htb {limited_class} || exit 5
{leaf_line}%(filters)s
echo "filters=$(tc filter show dev %(dev)s parent {handle}: | grep -c 'flowid {handle}:2')"
"""


def delete_script(handle: str) -> str:
    """The shell script that deletes the HTB root of `handle` on %(dev)s, if there, and
    prints how many qdiscs of that handle are left."""
    return f"""
if tc qdisc show dev %(dev)s root 2>/dev/null | grep -q '^qdisc htb {handle}: root'; then
  tc qdisc del dev %(dev)s root || exit 5
fi
echo "left=$(tc qdisc show dev %(dev)s 2>/dev/null | grep -c ' {handle}: ')"
"""


def peer_filters(handle: str, dev: str, peers: Sequence[str]) -> str:
    """One u32 filter per peer sending its packets into class 2 of `handle`."""
    return "\n".join(
        f"tc filter add dev {dev} parent {handle}: protocol ip prio 1 u32 match ip dst "
        f"{shlex.quote(peer)}/32 flowid {handle}:2 || exit 5" for peer in peers)


_ADD = add_script(HANDLE, "rate %(rate)s ceil %(rate)s")
_DELETE = delete_script(HANDLE)

_OURS_ANYWHERE = f"""
for dev in $(ls /sys/class/net); do
  if tc qdisc show dev "$dev" root 2>/dev/null | grep -q '^qdisc htb {HANDLE}: root'; then
    tc qdisc del dev "$dev" root || exit 5
  fi
done
echo "left=$(tc qdisc show 2>/dev/null | grep -c ' {HANDLE}: ')"
"""


def check_rate(rate: object) -> str:
    """A tc rate such as 1mbit or 500kbit; anything else is refused (it reaches a shell)."""
    if not isinstance(rate, str) or not RATE.fullmatch(rate):
        raise NucleusError(f"bandwidth rate must look like 1mbit, 500kbit or 2mbps, got {rate!r}")
    return rate


def bandwidth(pool: Any, journal: Journal, node: str, peers: Sequence[str], rate: str) -> JournalEntry:
    """Limit traffic from `node` to `peers` to `rate`; journaled first, verified after."""
    rate = check_rate(rate)
    peers = list(dict.fromkeys(peers))
    if not peers:
        raise NucleusError(f"node {node}: no peers to shape")
    for peer in peers:
        if not is_peer_address(peer):
            raise NucleusError(f"node {node}: peer address {peer!r} is not an IPv4 address or host name")
    dev = device(pool, node, peers[0])
    entry = journal.record("bandwidth", node, peers=peers, rate=rate, dev=dev)
    result = sh(pool, node, _ADD % {"dev": dev, "rate": rate, "filters": peer_filters(HANDLE, dev, peers),
                                    "defaults": " ".join(DEFAULT_ROOTS)})
    if result.exited == 6:
        journal.mark_undone(entry, applied=False)
        owner = result.stdout.strip().split("=", 1)[-1]
        raise NucleusError(f"node {node}: {dev} already has a {owner} root qdisc "
                           f"({'another bandwidth fault' if owner == 'ours' else 'not ours'}); "
                           f"one bandwidth limit per node at a time")
    if result.exited != 0 or result.stdout.strip() != f"filters={len(peers)}":
        _undo_quietly(pool, journal, entry)
        raise NucleusError(f"node {node}: bandwidth limit did not take effect (exit {result.exited}): "
                           f"{(result.stderr or result.stdout).strip()[:200]}")
    return entry


def remove(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    """Undo a bandwidth limit: delete our root qdisc, verify none of ours is left."""
    dev = entry.params.get("dev", "")
    script = _DELETE % {"dev": shlex.quote(dev)} if dev else _OURS_ANYWHERE
    result = sh(pool, entry.node, script)
    if result.exited != 0 or result.stdout.strip() != "left=0":
        raise NucleusError(f"node {entry.node}: could not remove the bandwidth limit on {dev or 'its devices'}: "
                           f"{(result.stdout + result.stderr).strip()[:200]}")
    journal.mark_undone(entry)


def device(pool: Any, node: str, peer: str) -> str:
    """The interface through which `node` reaches `peer`."""
    result = sh(pool, node, _DEVICE % {"peer": shlex.quote(peer)})
    dev = result.stdout.strip().removeprefix("dev=")
    if result.exited != 0 or not re.fullmatch(r"[A-Za-z0-9_.@-]{1,15}", dev):
        raise NucleusError(f"node {node}: no route to {peer} (cannot tell which interface to shape)")
    return dev.split("@", 1)[0]


def shaped(pool: Any, node: str) -> list[str]:
    """Our qdiscs, classes and filters on the node right now (`tc` lines), for checks and tests."""
    result = sh(pool, node, f"tc qdisc show; for d in $(ls /sys/class/net); do "
                            f"tc class show dev $d; tc filter show dev $d; done 2>/dev/null")
    return [line for line in result.stdout.splitlines() if f"{HANDLE}:" in line]


def _undo_quietly(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    try:
        remove(pool, journal, entry)
    except Exception:  # noqa: BLE001 - the apply error is the one to report; heal retries
        pass
