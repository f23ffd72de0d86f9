"""The plugin API: the example of docs/nemeses.md installed as a package and run on a cluster."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

import faults
from faults import registry
from faults.runner import run_schedule
from faults.schedule import FaultSpec, ScheduleSpec, plan
from faults.validate import validate
from support.faults import chain_is_gone, make_context, reachability, read_events
from support.plugins import CHAOS, example_site

plugin_site = example_site("nemeses.md", "### A complete example", registry.ENTRY_POINT_GROUP)


@pytest.fixture
def plugin_loaded(plugin_site, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    registry.load_plugins(reload=True)
    yield
    monkeypatch.undo()
    sys.modules.pop("chaos_linkcut", None)
    registry.load_plugins(reload=True)


def test_chaos_faults_lists_builtins_and_the_installed_plugin(plugin_site) -> None:
    env = {**os.environ, "PYTHONPATH": str(plugin_site)}
    listing = subprocess.run([CHAOS, "faults"], capture_output=True, text=True, env=env, timeout=60)
    assert listing.returncode == 0, listing.stderr
    lines = {line.split()[0]: line for line in listing.stdout.splitlines()}
    assert "cut the link between two random nodes" in lines["link-cut"]
    assert "chaos_linkcut" in lines["link-cut"]
    section6 = ["noop", "random-kill", "minor-kill", "major-kill", "fixed-kill", "leader-kill",
                "random-suspend", "minor-suspend", "major-suspend", "fixed-suspend", "leader-suspend",
                "random-partition", "fixed-partition", "leader-partition", "partition-majorities-ring",
                "bridge", "random-loss"]
    assert set(section6) <= set(lines)


@pytest.mark.cluster
def test_the_plugin_nemesis_runs_on_a_cluster_and_is_healed(plugin_loaded, netns_cluster, tmp_path) -> None:
    from support.faults import start_servers, stop_servers

    inventory, pool = netns_cluster
    assert validate(["link-cut"], inventory.names) == [FaultSpec("link-cut", {})]
    procs = start_servers(inventory, pool)
    try:
        ctx = make_context(inventory, pool, tmp_path, procs, seed=4)
        during: list[dict[str, set[str]]] = []
        spec = ScheduleSpec([FaultSpec("link-cut")], interval=0.1, duration=0.5)
        run_schedule(ctx, plan(4, spec, 1.0), threading.Event(),
                            on_change=lambda active: active and during.append(reachability(inventory, pool)))
        start, stop = read_events(tmp_path)
        a, b = start["value"]["targets"]
        assert start["f"] == "link-cut" and start["value"]["grudge"] == {a: [b], b: [a]}
        assert b not in during[0][a] and a not in during[0][b]
        third = next(n for n in inventory.names if n not in (a, b))
        assert during[0][third] == {a, b}
        assert stop["value"]["phase"] == "stop" and stop["error"] is None
        assert ctx.journal.pending() == [] and all(chain_is_gone(pool, n) for n in inventory.names)
    finally:
        stop_servers(pool, procs)


def test_a_plugin_without_start_or_stop_is_refused() -> None:
    class Half:
        name = "half"
        description = "no stop"

        def start(self, ctx):
            return None

    with pytest.raises(faults.FaultError, match="missing the stop"):
        faults.register(Half)


def test_a_plugin_cannot_take_a_builtin_name(monkeypatch) -> None:
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))

    class Impostor:
        name = "random-kill"
        description = "not the real one"

        def start(self, ctx):
            return None

        def stop(self, ctx, handle):
            return None

    with pytest.raises(faults.FaultError, match="'random-kill' is taken by builtin"):
        faults.register(Impostor)


@pytest.mark.parametrize("module, source, problem", [
    ("chaos_broken_missing", None, "chaos_broken_missing"),                        # no such module
    ("chaos_exits_at_import", "import sys\nsys.exit('no config')\n", "SystemExit: no config"),
])
def test_a_broken_plugin_is_reported_and_the_rest_still_load(tmp_path, monkeypatch, module, source,
                                                            problem) -> None:
    dist = tmp_path / "chaos_broken-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: chaos-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[chaos.faults]\nbroken = {module}:Nope\n")
    if source is not None:
        (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    registry.load_plugins(reload=True)
    try:
        assert any(problem in line for line in registry.plugin_errors())
        assert "random-kill" in registry.names()
    finally:
        monkeypatch.undo()
        registry.load_plugins(reload=True)


@pytest.mark.parametrize("names, nodes, fixed, message", [
    (["random-kil"], 5, (), "unknown fault 'random-kil'; known faults: bridge, clock-strobe, figure-8-partition, fixed-"),
    (["bridge"], 2, (), "fault bridge needs at least 3 nodes; the cluster has 2"),
    (["partition-majorities-ring"], 2, (), "needs at least 3 nodes"),
    (["minor-suspend"], 2, (), "needs at least 3 nodes"),
    (["random-partition"], 1, (), "needs at least 2 nodes"),
    (["fixed-kill"], 3, (), "fault fixed-kill: needs the nodes to hit: targets=n1,n2"),
    (["fixed-partition:targets=n2,n8"], 3, (), "target(s) n8 not in the cluster (nodes: n1, n2, n3)"),
    (["fixed-suspend"], 3, ("n0",), "target(s) n0 not in the cluster"),
    (["random-loss:probability=0"], 3, (), "probability must be in (0, 1]"),
    (["random-kill:targets=n1"], 3, (), "unknown option(s) targets (options: signal)"),
])
def test_bad_fault_choices_fail_before_the_run_with_one_clear_line(names, nodes, fixed, message) -> None:
    with pytest.raises(faults.FaultError) as error:
        validate(names, [f"n{i}" for i in range(1, nodes + 1)], fixed)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_validate_fills_in_fixed_targets_and_keeps_options() -> None:
    specs = validate(["fixed-kill", "random-loss:probability=0.4", "noop"], ["n1", "n2", "n3"], ["n2"])
    assert specs == [FaultSpec("fixed-kill", {"targets": ["n2"]}), FaultSpec("random-loss", {"probability": 0.4}),
                     FaultSpec("noop", {})]
