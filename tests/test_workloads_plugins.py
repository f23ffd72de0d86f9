"""The workload plugin API: the example of docs/workloads.md installed as a package is a
workload of `chaos run` and a route of the checkers; what the registry refuses."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from checkers.routes import infer_workload, route
from support.plugins import CHAOS, example_site
from support.plugins import own_registry as own_registry_fixture
from workloads import Route, registry

plugin_site = example_site("workloads.md", "### A workload as a plugin", registry.ENTRY_POINT_GROUP)

own_registry = own_registry_fixture(registry)


def test_the_builtins_carry_their_routes_in_the_order_infer_workload_tries_them():
    # In a fresh interpreter that imports the register workload first: still listed last.
    probe = "import workloads.register; from workloads import registry; print(list(registry.routes()))"
    fresh = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert fresh.stdout.strip() == ("['queue', 'log', 'register', 'group', 'ordered', 'transactional', "
                                    "'delayed']"), fresh.stderr
    assert list(registry.routes())[:3] == ["queue", "log", "register"]
    assert route("log").model == "log" and route("register").model == "cas-register"
    assert route("queue").anomalies == registry.MESSAGE_ANOMALIES and route("queue").model is None
    assert infer_workload({"append", "read"}) == "log" and infer_workload({"cas"}) == "register"
    assert infer_workload({"consume"}) == "ordered" and infer_workload({"tx-check"}) == "transactional"


def test_the_installed_example_runs_as_a_workload_and_the_checkers_route_it(plugin_site, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), os.environ.get("PYTHONPATH", "")]),
           "CHAOS_HOME": str(tmp_path)}
    dry = subprocess.run([CHAOS, "run", "--dry-run", "--workload", "fire-and-forget", "--profile", "single-broker",
                          "--fault", "noop", "--time", "5", "--seed", "3"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert dry.returncode == 0, dry.stderr + dry.stdout
    assert "single-broker / fire-and-forget / noop" in dry.stdout
    assert "operations:" in dry.stdout and "(fire " in dry.stdout
    listed = subprocess.run([CHAOS, "run", "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert "fire-and-forget" in listed.stdout
    probe = ("from checkers.routes import infer_workload, route; "
             "print(infer_workload({'fire'}), route('fire-and-forget'))")
    seen = subprocess.run([str(CHAOS).removesuffix("chaos") + "python", "-c", probe],
                          capture_output=True, text=True, timeout=120, env=env)
    assert seen.stdout.strip() == ("fire-and-forget Route(functions=frozenset({'fire'}), anomalies=None, "
                                   "model=None)"), seen.stderr


def test_a_workload_without_a_route_is_refused(own_registry):
    class NoRoute:
        name = "no-route"

        def plan_op(self): ...

        def client(self): ...

        def execute(self): ...

    with pytest.raises(registry.WorkloadError, match="no-route: `route` must be"):
        registry.register(NoRoute)


def test_a_builtin_workload_name_cannot_be_taken_again(own_registry):
    class Queue:
        name = "queue"
        route = Route(frozenset({"x"}))

        def plan_op(self): ...

        def client(self): ...

        def execute(self): ...

    with pytest.raises(registry.WorkloadError, match="'queue' is taken by workloads.queue"):
        registry.register(Queue)
