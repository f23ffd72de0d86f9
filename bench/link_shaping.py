"""random-bandwidth's shaper (tc HTB, nuclei/shape.py): the rate it really gives, and its cost.

    .venv/bin/python bench/link_shaping.py                       # 1mbit, 10mbit, 100mbit
    .venv/bin/python bench/link_shaping.py --rates 256kbit 1gbit --seconds 4

Two namespace nodes; n1 pushes bytes to n2 over TCP for about `--seconds` per
rate and n2 reports what arrived. The reference is the same push with no
limit (and with our HTB on but n2 not a shaped peer: the cost of the qdisc and
its u32 filter for traffic that is not limited), measured in the same run. The
small-message round trip shows the latency the shaper adds when the link is
idle. Needs root. Prints numbers only.
"""
from __future__ import annotations

import argparse
import os
import secrets
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nuclei  # noqa: E402
from inventory import Pool, netns  # noqa: E402

PORT = 7392
SINK = ("import socket,sys\n"
        "s=socket.create_server((sys.argv[1],int(sys.argv[2])));s.settimeout(120)\n"
        "while True:\n"
        "    c,_=s.accept();n=0\n"
        "    while True:\n"
        "        b=c.recv(1<<16)\n"
        "        if not b: break\n"
        "        n+=len(b)\n"
        "        if b.endswith(b'?'): c.sendall(b'!')\n"
        "    c.sendall(str(n).encode());c.close()\n")
PUSH = ("import socket,sys,time\n"
        "c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=60)\n"
        "rtt=[]\n"
        "for _ in range(20):\n"
        "    t=time.perf_counter();c.sendall(b'?');c.recv(1);rtt.append(time.perf_counter()-t)\n"
        "end=time.monotonic()+float(sys.argv[3]);t=time.monotonic();blk=b'x'*16384\n"
        "while time.monotonic()<end: c.sendall(blk)\n"
        "c.shutdown(socket.SHUT_WR);n=int(c.recv(64));d=time.monotonic()-t\n"
        "rtt.sort();print(n/d, rtt[len(rtt)//2])\n")


def push(pool: Pool, target_host: str, seconds: float) -> tuple[float, float]:
    out = pool.run("n1", ["python3", "-c", PUSH, target_host, str(PORT), str(seconds)], timeout=120).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", nargs="+", default=["1mbit", "10mbit", "100mbit"])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    name = f"bench{os.getpid()}-{secrets.token_hex(2)}"
    inventory = netns.up(name, 3, persistent=False)
    try:
        with Pool(inventory) as pool, tempfile.TemporaryDirectory() as work:
            n2, n3 = inventory.nodes[1].host, inventory.nodes[2].host
            sink = pool.run("n2", f"nohup timeout 600 python3 -c {shlex.quote(SINK)} {n2} {PORT} "
                                  f">/dev/null 2>&1 & echo $!").stdout.strip()
            time.sleep(1.0)
            journal = nuclei.Journal(Path(work) / "journal.jsonl")
            try:
                rows = [("none (reference)", *push(pool, n2, args.seconds))]
                nuclei.bandwidth(pool, journal, "n1", [n3], "1mbit")
                rows.append(("htb on, peer not shaped", *push(pool, n2, args.seconds)))
                assert nuclei.heal(pool, journal).ok
                for rate in args.rates:
                    nuclei.bandwidth(pool, journal, "n1", [n2], rate)
                    rows.append((rate, *push(pool, n2, args.seconds)))
                    assert nuclei.heal(pool, journal).ok
            finally:
                nuclei.heal(pool, journal)
                pool.run("n2", f"kill {sink}", check=False)
    finally:
        netns.down(name)
    reference = rows[0][1]
    print(f"{'limit':26} {'Mbit/s':>10} {'x reference':>12} {'idle RTT ms':>12}")
    for label, rate, rtt in rows:
        print(f"{label:26} {rate * 8 / 1e6:10.2f} {rate / reference:12.4f} {rtt * 1000:12.3f}")


if __name__ == "__main__":
    main()
