"""One seam for systems under test: the systems table is the only place that knows which
systems exist, the imports have no circles, and a third system is one table entry."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli
from harness.spec import SpecError, build_spec
from inventory import Inventory, Node
from support import dummy_system
from support.import_graph import PACKAGES, circles, graph
from sut import systems
from workloads.clients import QueueClient

REPO = Path(__file__).resolve().parent.parent
# Raft's node starts its replicators and each replicator reports back to its node.
ALLOWED_CIRCLES = [["sut.raft.node", "sut.raft.replicator"]]
# A comparison of a system's name: `.system == ...`, `== "rocketmq"`, `"model" != ...`.
BY_NAME = re.compile(r"""\.system\s*(==|!=|\bin\b)|(==|!=)\s*["'](model|rocketmq)["']|["'](model|rocketmq)["']\s*(==|!=)""")
# The table itself, and real RocketMQ's own package (which may name itself).
TABLE = ("sut/systems.py", "sut/rocketmq/")


def test_the_import_graph_has_no_circle_but_the_raft_node_and_its_replicator():
    assert circles(graph(REPO)) == ALLOWED_CIRCLES


def test_the_graph_reader_sees_a_circle_through_a_lazy_import(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "harness" / "a.py").write_text("from harness.b import thing\n")
    (tmp_path / "harness" / "b.py").write_text("def thing():\n    from harness import a\n")
    assert circles(graph(tmp_path)) == [["harness.a", "harness.b"]]


def test_no_module_of_the_model_imports_real_rocketmq():
    edges = graph(REPO)
    model = [m for m in edges if m.split(".")[0] == "sut" and not m.startswith("sut.rocketmq")]
    reaching = {m: sorted(t for t in edges[m] if t.startswith("sut.rocketmq")) for m in model}
    assert {m: t for m, t in reaching.items() if t} == {}


def test_no_module_outside_the_systems_table_tests_a_system_by_name():
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO).as_posix()
            if where.startswith(TABLE):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if BY_NAME.search(line):
                    found.append(f"{where}:{number}: {line.strip()}")
    assert found == []


def test_the_by_name_pattern_catches_the_tests_the_table_replaced():
    for line in ('if profile.system == "rocketmq":', "if endpoints.system != MODEL:",
                 'system = "model" if x else y; ok = other == "model"'):
        assert BY_NAME.search(line), line
    assert not BY_NAME.search('system: str = "model"   # a default, not a test')


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(getattr(cls, name)) for name, member in vars(cls).items()
            if callable(getattr(cls, name)) and not name.startswith("_")}


def _parameters(signature: inspect.Signature) -> list[tuple[str, bool]]:
    return [(p.name, p.default is inspect.Parameter.empty) for p in signature.parameters.values()]


@pytest.mark.parametrize("protocol, part", [(systems.Deployer, "deployer"), (QueueClient, "queue_client")])
def test_every_system_implements_the_protocols_with_the_protocols_parameters(protocol, part):
    wanted = _public(protocol)
    wanted.update(_public(systems.ClusterStateReader) if protocol is systems.Deployer else {})
    for name, entry in systems.SYSTEMS.items():
        made_by = entry.part(part)
        for method, signature in wanted.items():
            found = getattr(made_by, method, None)
            assert callable(found), f"{name}: {made_by.__name__} has no {method}()"
            assert _parameters(inspect.signature(found))[:len(signature.parameters)] == _parameters(signature), \
                f"{name}: {made_by.__name__}.{method}{inspect.signature(found)} is not {method}{signature}"


def test_both_deployers_place_their_processes_without_a_pool(tmp_path):
    inventory = Inventory(name="planned", kind="netns",
                          nodes=[Node(name=f"n{i}", host=f"192.0.2.{i}") for i in range(1, 5)])
    for profile in ("controller-3", "rmq-controller-3"):
        deployer = systems.make_deployer(None, inventory, profile, tmp_path)
        assert isinstance(deployer, systems.Deployer)
        assert [n.name for n in deployer.used_nodes] == sorted({r.node for r in deployer.refs})


@pytest.fixture
def dummy(monkeypatch):
    """The dummy system, registered through the systems table alone."""
    monkeypatch.setitem(systems.SYSTEMS, dummy_system.NAME, dummy_system.ENTRY)
    return dummy_system


def test_a_third_system_in_the_table_answers_a_dry_run_without_deploying(dummy, tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path))  # no running local cluster to plan on
    result = CliRunner().invoke(cli, ["run", "--dry-run", "--profile", "dummy-3", "--fault", "leader-kill",
                                      "--time", "20", "--nodes", "3", "--seed", "7"])
    assert result.exit_code == 0, result.output
    assert "run: dummy-3 / queue / leader-kill, 20s" in result.output
    assert "failure detection 2s" in result.output
    assert re.search(r"\d+\.\d{3}s\s+start\s+leader-kill", result.output)
    assert systems.failure_detection_s("dummy-3", "fast") == 0.2
    assert "dummy-3" in systems.profiles() and systems.profile("dummy-3").system == "dummy"


@pytest.mark.parametrize("values, message", [
    ({"workload": "register"}, "workload register cannot run on dummy-3: the dummy has no registers"),
    ({"faults": ["random-crash"]}, "the dummy keeps nothing on disk"),
    ({"bugs": ["read-beyond-confirm-offset"]}, "dummy-3 runs the dummy system, which has none"),
])
def test_a_third_system_s_refusals_come_from_its_table_entry(dummy, tmp_path, monkeypatch, values, message):
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path))
    with pytest.raises(SpecError, match=re.escape(message)):
        build_spec({"profile": "dummy-3", "nodes": 3, "time": 20, **values}, check_store=False)


def test_a_system_missing_from_the_table_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["run", "--dry-run", "--profile", "dummy-3"])
    assert result.exit_code == EXIT_ERROR
    assert "unknown profile 'dummy-3'" in result.output
