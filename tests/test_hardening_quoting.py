"""No user value ever reaches a root shell as code (property tests on a real node).

Hypothesis builds values full of shell metacharacters, quotes, newlines and
unicode, each carrying a command that would create a canary file if a shell
ever ran it. Every fault option and every inventory string field gets them;
so does every nucleus that builds a remote command, over SSH on a real
namespace node. Each value is either refused with a one-line error naming
what is wrong, or used literally (the process sees exactly that argv, env,
cwd and pidfile); the canary never appears.
"""
from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import faults
import nuclei
from faults import registry
from faults.registry import create
from faults.validate import validate
from inventory import Inventory, InventoryError, NodeUnreachable, Pool, load
from nuclei.net import chain_rules
from nuclei.process import Proc, inspect, resume_stopped_under


CANARY_DIR = Path("/tmp") / f"chaos-canary-{os.getpid()}-{secrets.token_hex(3)}"
CANARY = CANARY_DIR / "pwned"
# Each fragment creates the canary if any shell (or iptables-restore line) interprets it.
ATTACKS = [f"; touch {CANARY}", f"$(touch {CANARY})", f"`touch {CANARY}`", f"' ; touch {CANARY} ; '",
           f'" ; touch {CANARY} ; "', f"\ntouch {CANARY}\n", f"| touch {CANARY}", f"&& touch {CANARY}",
           f"& touch {CANARY} &", f">{CANARY}", f"\\'$(touch {CANARY})\\'", f"\n-A INPUT -j ACCEPT\n"]
NOISE = st.text(alphabet=st.sampled_from(list("ab1 -_./:=,'\"\\$`;|&<>*?~(){}[]#!\t\n") + ["é", "ж", "字", "🙂"]),
                max_size=12)
hostile = st.builds(lambda a, attack, b: a + attack + b, NOISE, st.sampled_from(ATTACKS), NOISE)
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def canary():
    CANARY_DIR.mkdir(mode=0o777)
    yield
    assert not CANARY.exists(), "a user value was run by a shell"
    CANARY_DIR.rmdir()


def no_canary() -> None:
    assert not CANARY.exists(), "a user value was run by a shell"


def one_line_naming(error: Exception, *words: str) -> None:
    text = str(error)
    assert "\n" not in text and "Traceback" not in text, text
    for word in words:
        assert word in text, text


def builtin_options() -> list[tuple[str, str]]:
    return [(name, option) for name, reg in sorted(registry.known().items()) if reg.origin == "builtin"
            for option in reg.options()]


@pytest.mark.parametrize("fault,option", builtin_options())
@SETTINGS
@given(value=hostile)
def test_every_fault_option_refuses_shell_text_with_one_line_naming_fault_and_option(fault, option, value):
    with pytest.raises(faults.FaultError) as error:
        create(fault, **{option: value})
    one_line_naming(error.value, f"fault {fault}", f"option {option}=")
    with pytest.raises(faults.FaultError) as error:  # and typed on the command line
        validate([f"{fault}:{option}={value}"], ["n1", "n2", "n3"])
    assert "\n" not in str(error.value)
    no_canary()


NODE_FIELDS = ["name", "host", "user", "workdir", "netns", "roles", "key_file"]
INVENTORY_FIELDS = ["name", "known_hosts"]
LOCAL_ONLY = {"key_file", "known_hosts"}  # paths on the control node, given to paramiko, never to a shell


def inventory_with(tmp_path: Path, field: str, value: str, on_node: bool) -> Path:
    node = {"name": "n1", "host": "127.0.0.1"}
    data = {"name": "lab", "kind": "ssh", "nodes": [node]}
    target = node if on_node else data
    target[field] = [value] if field == "roles" else value
    path = tmp_path / f"inv-{secrets.token_hex(4)}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


@pytest.mark.parametrize("field,on_node", [(f, True) for f in NODE_FIELDS] + [(f, False) for f in INVENTORY_FIELDS])
@SETTINGS
@given(value=hostile)
def test_every_inventory_string_field_refuses_shell_text_or_keeps_it_literally(netns_cluster, tmp_path, field,
                                                                              on_node, value):
    path = inventory_with(tmp_path, field, value, on_node)
    try:
        inventory = load(path)
    except InventoryError as error:
        assert field not in LOCAL_ONLY, f"{field} is never run: it need not be refused"
        one_line_naming(error, str(path), field)
    else:
        assert field in LOCAL_ONLY, f"{field}={value!r} reaches remote commands and was accepted"
        holder = inventory.nodes[0] if on_node else inventory
        literal = path.parent.resolve() / Path(os.path.expanduser(value))
        assert getattr(holder, field) == literal, "kept literally (only ~ and a relative base resolved)"
        connect_with(netns_cluster[0], field, literal)
    no_canary()


def connect_with(real: Inventory, field: str, literal: Path) -> None:
    """A real node, reached with the accepted local path in `field`: the SSH login fails
    on that (nonexistent) file, with one line, and nothing runs."""
    node = real.nodes[0]
    if field == "key_file":
        inventory = real.model_copy(update={"nodes": [node.model_copy(update={"key_file": literal})]})
    else:
        inventory = real.model_copy(update={"nodes": [node], "known_hosts": literal, "strict_host_keys": True})
    with Pool(inventory, connect_timeout=10) as pool:
        with pytest.raises(NodeUnreachable) as error:
            pool.run(node.name, f"touch {CANARY}")
    one_line_naming(error.value, f"node {node.name}")


@pytest.fixture(scope="module")
def node(netns_cluster):
    inventory, pool = netns_cluster
    return inventory.nodes[0], pool


@SETTINGS
@given(arg=hostile, env_value=hostile, name=hostile)
def test_a_process_started_and_killed_with_shell_text_everywhere_sees_it_literally(node, tmp_path, arg,
                                                                                  env_value, name):
    target, pool = node
    safe_name = name.replace("/", "_").replace("\0", "")
    directory = tmp_path / secrets.token_hex(3) / safe_name
    argv = ("python3", "-c", "import time; time.sleep(600)", arg)
    proc = Proc(node=target.name, name=safe_name, pidfile=str(directory / f"{safe_name}.pid"), argv=argv,
                       cwd=str(directory.parent), env={"CHAOS_VALUE": env_value},
                       logfile=str(directory / f"{safe_name}.log"))
    directory.parent.mkdir(parents=True)
    pid = pool.start_detached(target.name, list(argv), proc.pidfile, proc.logfile, cwd=proc.cwd, env=proc.env)
    try:
        assert Path(proc.pidfile).read_text().strip() == str(pid)
        cmdline = wait_for_exec(pid, "python3")  # setsid and env exec in turn: wait for the last one
        assert cmdline[-1] == arg
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"CHAOS_VALUE={env_value}".encode() in environ
        assert os.readlink(f"/proc/{pid}/cwd") == proc.cwd
        [state] = inspect(pool, proc)
        assert state.pid == pid and state.cmdline[-1] == arg
        journal = nuclei.Journal(tmp_path / f"{secrets.token_hex(3)}.jsonl")
        with pytest.raises(nuclei.NucleusError) as error:
            nuclei.kill(pool, journal, proc, signal=arg)
        one_line_naming(error.value, "signal")
        assert journal.entries() == []
        [entry] = nuclei.kill(pool, journal, proc)
        assert entry.params["argv"] == list(argv) and entry.params["pidfile"] == proc.pidfile
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    no_canary()


def wait_for_exec(pid: int, program: str, timeout: float = 10) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        argv = [w.decode() for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
        if argv and os.path.basename(argv[0]) == program or time.monotonic() > deadline:
            return argv
        time.sleep(0.01)


@SETTINGS
@given(text=hostile)
def test_node_side_searches_take_shell_text_as_data(node, text):
    target, pool = node
    assert inspect(pool, Proc(node=target.name, name="x", pidfile=f"/tmp/{text}")) == []
    assert inspect(pool, Proc(node=target.name, name="x", pattern=f"{target.workdir}/{text}")) == []
    assert resume_stopped_under(pool, target.name, f"/tmp/{text}") == []
    no_canary()


@SETTINGS
@given(text=hostile)
def test_iptables_nuclei_refuse_shell_text_as_a_peer_or_probability(node, tmp_path, text):
    target, pool = node
    journal = nuclei.Journal(tmp_path / f"{secrets.token_hex(3)}.jsonl")
    with pytest.raises(nuclei.NucleusError) as error:
        nuclei.drop(pool, journal, target.name, [text])
    one_line_naming(error.value, "peer address")
    with pytest.raises(nuclei.NucleusError) as error:
        nuclei.loss(pool, journal, target.name, ["10.0.0.1"], text)  # type: ignore[arg-type]
    one_line_naming(error.value, "probability")
    with pytest.raises(nuclei.NucleusError) as error:
        nuclei.bandwidth(pool, journal, target.name, [text], "1mbit")
    one_line_naming(error.value, "peer address")
    with pytest.raises(nuclei.NucleusError) as error:
        nuclei.bandwidth(pool, journal, target.name, ["10.0.0.1"], text)
    one_line_naming(error.value, "rate")
    assert journal.entries() == [] and chain_rules(pool, target.name) == []
    no_canary()
