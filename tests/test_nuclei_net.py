"""iptables nuclei on a real namespace cluster, verified by connections and counters inside the nodes."""
from __future__ import annotations

import shlex

import pytest

import nuclei
from nuclei.net import CHAIN, chain_rules, clear, remove
from support.faults import chain_is_gone, reachability, start_servers, stop_servers

pytestmark = pytest.mark.cluster

# A UDP receiver that counts datagrams until it sees "end", then writes the count.
RECEIVER = ("import socket, sys\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 7200))\n"
            "s.settimeout(30); n = 0\n"
            "while True:\n"
            "    data = s.recv(64)\n"
            "    if data == b'end': break\n"
            "    n += 1\n"
            "open(sys.argv[2], 'w').write(str(n))\n")
# A packet dropped in the sender's OUTPUT chain fails sendto() with EPERM: lost too.
SENDER = ("import socket, sys, time\n"
          "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "for i in range(int(sys.argv[2])):\n"
          "    try: s.sendto(b'x', (sys.argv[1], 7200))\n"
          "    except PermissionError: pass\n"
          "    time.sleep(0.001)\n")


@pytest.fixture(scope="module")
def cluster(netns_cluster):
    inventory, pool = netns_cluster
    procs = start_servers(inventory, pool)
    try:
        yield inventory, pool
    finally:
        stop_servers(pool, procs)


@pytest.fixture
def journal(tmp_path, cluster):
    journal = nuclei.Journal(tmp_path / "journal.jsonl")
    yield journal
    nuclei.heal(cluster[1], journal)


def drop_counters(pool, node: str) -> int:
    out = pool.run(node, f"iptables -w -L {CHAIN} -v -n -x").stdout
    return sum(int(line.split()[0]) for line in out.splitlines()[2:] if "DROP" in line)


def test_partition_blocks_both_directions(cluster, journal) -> None:
    inventory, pool = cluster
    n1, n2, n3 = inventory.nodes
    nuclei.drop(pool, journal, n1.name, [n2.host])
    nuclei.drop(pool, journal, n2.name, [n1.host])
    reach = reachability(inventory, pool)
    assert n2.name not in reach[n1.name] and n1.name not in reach[n2.name]
    assert reach[n3.name] == {n1.name, n2.name}, "the third node still reaches both"
    assert n3.name in reach[n1.name] and n3.name in reach[n2.name]
    assert drop_counters(pool, n1.name) > 0 and drop_counters(pool, n2.name) > 0
    report = nuclei.heal(pool, journal)
    assert report.ok and len(report.done) == 2
    assert reachability(inventory, pool)[n1.name] == {n2.name, n3.name}


def test_drop_on_one_node_alone_still_cuts_both_directions(cluster, journal) -> None:
    inventory, pool = cluster
    n1, n2, _ = inventory.nodes
    nuclei.drop(pool, journal, n1.name, [n2.host])
    reach = reachability(inventory, pool)
    assert n2.name not in reach[n1.name] and n1.name not in reach[n2.name]


def test_a_port_cut_blocks_only_the_connections_to_that_port_of_the_peer(cluster, journal) -> None:
    from support.faults import PORT
    inventory, pool = cluster
    n1, n2, _ = inventory.nodes
    nuclei.drop(pool, journal, n1.name, [n2.host], port=PORT)
    reach = reachability(inventory, pool)
    assert n2.name not in reach[n1.name], "n1's connections to n2's port are cut"
    assert n1.name in reach[n2.name], "n2 still opens connections to n1: only n1 -> n2:PORT is cut"
    assert all("-p tcp" in rule for rule in chain_rules(pool, n1.name))
    with pytest.raises(nuclei.NucleusError, match="TCP port"):
        nuclei.drop(pool, journal, n1.name, [n2.host], port=70000)
    assert nuclei.heal(pool, journal).ok
    assert n2.name in reachability(inventory, pool)[n1.name]


def test_an_inbound_port_cut_may_name_the_control_node_but_never_its_ssh(cluster, journal) -> None:
    from support.faults import PORT
    inventory, pool = cluster
    n1, n2, _ = inventory.nodes
    control = nuclei.net.control_address(pool, n2.name)
    nuclei.drop(pool, journal, n2.name, [n1.host, control], port=PORT, inbound=True)
    reach = reachability(inventory, pool)
    assert n2.name not in reach[n1.name], "n1's connections to n2's port are cut"
    assert n1.name in reach[n2.name], "n2's own connections out still work"
    assert pool.run(n2.name, "true").ok, "SSH from the control node still works"
    with pytest.raises(nuclei.NucleusError, match="SSH port"):
        nuclei.drop(pool, journal, n2.name, [control], port=pool.node(n2.name).port, inbound=True)


# Answers each line it reads with a short ("ok") then a long (300 bytes) answer, and logs
# every line it received with the caller's address.
ANSWERER = ("import socket, sys, threading\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind((sys.argv[1], 7300)); s.listen(16)\n"
            "def serve(c, peer):\n"
            "    for i, line in enumerate(c.makefile('rb')):\n"
            "        open(sys.argv[2], 'a').write(peer + ' ' + line.decode())\n"
            "        c.sendall(b'ok\\n' if i == 0 else b'x' * 299 + b'\\n')\n"
            "while True:\n"
            "    c, a = s.accept(); threading.Thread(target=serve, args=(c, a[0]), daemon=True).start()\n")
# Sends two requests on one connection; prints which got an answer within 2 s.
ASKER = ("import json, socket, sys\n"
         "c = socket.create_connection((sys.argv[1], 7300), timeout=2); got = []\n"
         "for req in (b'one\\n', b'two\\n'):\n"
         "    c.sendall(req)\n"
         "    try: got.append(len(c.recv(1000)) > 0)\n"
         "    except socket.timeout: got.append(False)\n"
         "print(json.dumps(got))\n")


def test_an_answer_cut_delivers_the_requests_and_drops_only_the_answers(cluster, journal) -> None:
    import json
    inventory, pool = cluster
    n1, n2, n3 = inventory.nodes
    logs = {n.name: f"{n.workdir}/answers.log" for n in (n1, n2)}
    for node in (n1, n2):
        pool.run(node.name, f"rm -f {logs[node.name]}")
        pool.start_detached(node.name, ["python3", "-c", ANSWERER, node.host, logs[node.name]],
                            f"{node.workdir}/answerer.pid", f"{node.workdir}/answerer.log")
    try:
        ask = lambda src, dst: json.loads(pool.run(  # noqa: E731
            src.name, ["python3", "-c", ASKER, dst.host], timeout=30, check=False).stdout or "null")
        wait = "for i in $(seq 50); do ss -ltn | grep -q :7300 && break; sleep 0.1; done"
        for node in (n1, n2):
            pool.run(node.name, wait)
        hold = "import socket, sys, time; c = socket.create_connection((sys.argv[1], 7300)); time.sleep(3)"
        pool.run(n1.name, f"nohup timeout 10 python3 -c {shlex.quote(hold)} {n2.host} >/dev/null 2>&1 &")
        held = set()
        for _ in range(50):
            held = nuclei.net.connections(pool, n2.name, 7300)
            if held:
                break
        assert {peer for peer, _ in held} == {n1.host}, "n1's open connection to n2:7300 is seen at n2"
        # n1's answers from n2:7300 and from its own node's 7300 are cut (a controller beside the broker)
        nuclei.drop(pool, journal, n1.name, [n2.host, n1.host], port=7300, answers=True)
        assert ask(n1, n2) == [False, False], "neither the short nor the long answer arrives"
        assert ask(n1, n1) == [False, False], "answers on the node's own loopback path are cut too"
        assert ask(n3, n1) == [True, True], "n1's own answers to other nodes still leave"
        received = pool.run(n2.name, f"cat {logs[n2.name]}").stdout.split()
        assert received == [n1.host, "one", n1.host, "two"], "both requests arrived: acknowledgements flow"
        with pytest.raises(nuclei.NucleusError, match="needs a port"):
            nuclei.drop(pool, journal, n1.name, [n2.host], answers=True)
        assert nuclei.heal(pool, journal).ok
        assert ask(n1, n2) == [True, True]
    finally:
        for node in (n1, n2):
            pool.run(node.name, f"kill -9 $(cat {node.workdir}/answerer.pid) 2>/dev/null", check=False)

def test_removing_one_action_keeps_the_others_and_foreign_rules(cluster, journal) -> None:
    inventory, pool = cluster
    n1, n2, n3 = inventory.nodes
    foreign = "INPUT -s 192.0.2.77 -j ACCEPT"  # someone else's rule (documentation address)
    pool.run(n1.name, f"iptables -w -A {foreign}")
    try:
        first = nuclei.drop(pool, journal, n1.name, [n2.host])
        second = nuclei.loss(pool, journal, n1.name, [n3.host], 0.5)
        assert len(chain_rules(pool, n1.name)) == 4
        remove(pool, journal, first)
        rules = chain_rules(pool, n1.name)
        assert len(rules) == 2 and all(nuclei.net.tag_of(second) in rule for rule in rules)
        assert [e.id for e in journal.pending()] == [second.id]
        nuclei.heal(pool, journal)
        assert chain_is_gone(pool, n1.name)
        assert "-A INPUT -s 192.0.2.77/32 -j ACCEPT" in pool.run(n1.name, "iptables -w -S INPUT").stdout
    finally:
        pool.run(n1.name, f"iptables -w -D {foreign}", check=False)


def test_heal_is_idempotent_and_verifies_the_chain_is_gone(cluster, journal) -> None:
    inventory, pool = cluster
    n1, n2, _ = inventory.nodes
    nuclei.drop(pool, journal, n1.name, [n2.host])
    assert nuclei.heal(pool, journal).ok
    again = nuclei.heal(pool, journal)
    assert again.ok and again.done == []
    clear(pool, n1.name, unhook=True)  # on a clean node: still verified, still fine
    assert chain_is_gone(pool, n1.name)


def test_random_loss_drops_about_the_given_share_of_packets(cluster, journal) -> None:
    inventory, pool = cluster
    n1, n2, _ = inventory.nodes
    count_file = f"{n2.workdir}/udp.count"
    pool.run(n2.name, f"rm -f {count_file}")
    pool.start_detached(n2.name, ["python3", "-c", RECEIVER, n2.host, count_file, n2.workdir],
                        f"{n2.workdir}/udp.pid", f"{n2.workdir}/udp.log")
    entry = nuclei.loss(pool, journal, n1.name, [n2.host], 0.5)
    pool.run(n1.name, ["python3", "-c", "import time; time.sleep(0.3)"])  # receiver is bound
    pool.run(n1.name, ["python3", "-c", SENDER, n2.host, "400"], timeout=60)
    remove(pool, journal, entry)
    pool.run(n1.name, ["python3", "-c", SENDER.replace("b'x'", "b'end'"), n2.host, "3"])
    received = int(pool.run(n2.name, f"for i in $(seq 100); do [ -s {count_file} ] && break; sleep 0.1; done; "
                                     f"cat {count_file}").stdout)
    assert 100 <= received <= 300, f"{received} of 400 arrived with 50% loss"


def test_the_control_node_address_is_never_blocked(cluster, journal) -> None:
    inventory, pool = cluster
    control = nuclei.net.control_address(pool, inventory.nodes[0].name)
    with pytest.raises(nuclei.NucleusError, match="refusing to block"):
        nuclei.drop(pool, journal, inventory.nodes[0].name, [inventory.nodes[1].host, control])
    assert journal.entries() == []
    assert chain_rules(pool, inventory.nodes[0].name) == []


def test_bad_loss_probability_is_refused_before_anything_is_applied(cluster, journal) -> None:
    inventory, pool = cluster
    with pytest.raises(nuclei.NucleusError, match=r"probability must be in \(0, 1\]"):
        nuclei.loss(pool, journal, inventory.nodes[0].name, [inventory.nodes[1].host], 1.5)
    assert journal.entries() == []
