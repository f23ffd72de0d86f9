"""The link degrader (nuclei/degrade.py): the delay it really adds, and the packets per second it sustains.

    .venv/bin/python bench/link_degrade.py                    # delay 10 ms and 50 ms +- 10
    .venv/bin/python bench/link_degrade.py --delays 5 100 --seconds 3

Two of three namespace nodes; n1's packets to n2 go through the mechanism this kernel
has (netem if it adds a qdisc, else the NFQUEUE degrader), on n1 only, so
the delay is one way. Each row measures, from n1 to n2:

- the round trip of a 1-byte TCP request/response on one connection (median
  and p99 of 200), so the added one-way delay is the row's median minus the
  reference's;
- UDP packets per second: n1 sends 64-byte datagrams as fast as it can for
  `--seconds`, n2 counts what arrives (the degrader's throughput, and what it
  drops once its queue is full).

The reference is the same traffic with nothing applied, measured in the same
run; "pass-through" queues every packet to the degrader and holds none (the
mechanism's own cost). Needs root. Prints numbers only.
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
from nuclei import degrade  # noqa: E402

PORT = 7394
SERVER = ("import socket,sys,threading\n"
          "def tcp():\n"
          "    s=socket.create_server((sys.argv[1],int(sys.argv[2])))\n"
          "    while True:\n"
          "        c,_=s.accept();c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
          "        while True:\n"
          "            b=c.recv(1)\n"
          "            if not b: break\n"
          "            c.sendall(b)\n"
          "threading.Thread(target=tcp,daemon=True).start()\n"
          "u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);u.bind((sys.argv[1],int(sys.argv[2])))\n"
          "u.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1<<24);n=0\n"
          "while True:\n"
          "    d,a=u.recvfrom(2048)\n"
          "    if d==b'?': u.sendto(str(n).encode(),a);n=0\n"
          "    else: n+=1\n")
CLIENT = ("import socket,sys,time\n"
          "host,port,secs=sys.argv[1],int(sys.argv[2]),float(sys.argv[3])\n"
          "c=socket.create_connection((host,port),timeout=30);c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
          "r=[]\n"
          "for _ in range(200):\n"
          "    t=time.perf_counter();c.sendall(b'x');c.recv(1);r.append((time.perf_counter()-t)*1000)\n"
          "r.sort();u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);u.settimeout(10)\n"
          "u.sendto(b'?',(host,port));u.recv(64)\n"
          "blk=b'x'*64;sent=0;end=time.monotonic()+secs;t=time.monotonic()\n"
          "while time.monotonic()<end:\n"
          "    for _ in range(100): u.sendto(blk,(host,port))\n"
          "    sent+=100\n"
          "d=time.monotonic()-t;time.sleep(1.5);u.sendto(b'?',(host,port));got=int(u.recv(64))\n"
          "print(r[len(r)//2],r[int(len(r)*0.99)],sent/d,got/d)\n")


def measure(pool: Pool, host: str, seconds: float) -> tuple[float, ...]:
    out = pool.run("n1", ["python3", "-c", CLIENT, host, str(PORT), str(seconds)], timeout=300).stdout.split()
    return tuple(float(x) for x in out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", nargs="+", type=float, default=[10.0, 50.0])
    parser.add_argument("--jitter", type=float, default=10.0, help="jitter of the largest delay row")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    name = f"bench{os.getpid()}-{secrets.token_hex(2)}"
    inventory = netns.up(name, 3, persistent=False)
    try:
        with Pool(inventory) as pool, tempfile.TemporaryDirectory() as work:
            n1, n2 = inventory.nodes[:2]
            server = pool.run("n2", f"nohup timeout 900 python3 -c {shlex.quote(SERVER)} {n2.host} {PORT} "
                                    f">/dev/null 2>&1 & echo $!").stdout.strip()
            time.sleep(1.0)
            journal = nuclei.Journal(Path(work) / "journal.jsonl")
            how = degrade.mechanism(pool, "n1")
            cases = [("pass-through", degrade.Degradation("reorder", ms=1, probability=1.0))]
            cases += [(f"delay {ms:g} ms", degrade.Degradation("delay", ms=ms)) for ms in args.delays]
            top = max(args.delays)
            cases.append((f"delay {top:g} +- {args.jitter:g} ms",
                          degrade.Degradation("delay", ms=top, jitter=min(args.jitter, top))))
            try:
                rows = [("none (reference)", *measure(pool, n2.host, args.seconds))]
                for label, degradation in cases:
                    degrade.degrade(pool, journal, "n1", [n2.host], degradation, n1.workdir)
                    rows.append((label, *measure(pool, n2.host, args.seconds)))
                    assert nuclei.heal(pool, journal).ok
            finally:
                nuclei.heal(pool, journal)
                pool.run("n2", f"kill {server}", check=False)
    finally:
        netns.down(name)
    reference = rows[0]
    print(f"mechanism: {how}")
    print(f"{'degradation':24} {'RTT p50 ms':>10} {'p99 ms':>8} {'added ms':>9} {'sent pps':>10} "
          f"{'delivered pps':>14} {'x reference':>12}")
    for label, p50, p99, sent, got in rows:
        print(f"{label:24} {p50:10.3f} {p99:8.3f} {p50 - reference[1]:9.3f} {sent:10.0f} {got:14.0f} "
              f"{got / reference[4]:12.3f}")


if __name__ == "__main__":
    main()
