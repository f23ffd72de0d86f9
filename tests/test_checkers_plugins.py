"""The checker plugin API: the example of docs/contracts.md installed as a package and run by
`chaos check`, and what the registry refuses."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from checkers import pipeline, registry
from checkers.context import RunFacts
from records import CheckInputs
from support.checker_runs import RunBuilder, poll, item, send
from support.plugins import CHAOS, example_site
from support.plugins import own_registry as own_registry_fixture

plugin_site = example_site("contracts.md", "### Writing a checker", registry.ENTRY_POINT_GROUP)

own_registry = own_registry_fixture(registry)


def queue_run(store: Path, name: str, slow_send_ms: float) -> Path:
    run = RunBuilder(store, name, {"workload": "queue"})
    send(run, 1, "m1", 0, 10)
    send(run, 2, "m2", 20, 20 + slow_send_ms)
    poll(run, 3, 20 + slow_send_ms + 10, 20 + slow_send_ms + 20, [item("m1"), item("m2")])
    run.final_log(20 + slow_send_ms + 40, {"q0": [item("m1"), item("m2")]})
    return run.dir


def broken_plugin(directory: Path) -> Path:
    """An installed distribution whose `chaos.checkers` entry point names a missing module."""
    dist = directory / "chaos_broken_checker-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: chaos-broken-checker\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[chaos.checkers]\nbroken = chaos_broken_checker_missing:Nope\n")
    return directory


@pytest.mark.spark
def test_chaos_check_runs_the_installed_checker_and_the_report_shows_it(plugin_site, tmp_path) -> None:
    store = tmp_path / "store"
    slow, quick = queue_run(store, "slow", 12_000), queue_run(store, "quick", 30)
    path = os.pathsep.join([str(plugin_site), str(broken_plugin(tmp_path / "broken"))])
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}
    done = subprocess.run([CHAOS, "check", str(store)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # the slow run is invalid
    assert "checker plugin not loaded: entry point broken = chaos_broken_checker_missing:Nope" in done.stdout
    assert "slow_ops" in done.stdout
    assert "slow: slow_ops: 1 operation(s) took longer than 10 s, the longest 12.0 s" in done.stdout
    slow_result = json.loads((slow / "results.json").read_text())
    quick_result = json.loads((quick / "results.json").read_text())
    assert slow_result["checkers"]["slow_ops"] == {
        "valid": False, "problems": ["1 operation(s) took longer than 10 s, the longest 12.0 s"],
        "slow": 1, "max_s": 12.0}
    assert slow_result["valid"] is False
    assert quick_result["checkers"]["slow_ops"]["valid"] is True
    assert quick_result["checkers"]["queue"]["valid"] is True  # the built-ins still ran
    page = (slow / "report" / "index.html").read_text()
    row = page[page.index('<tr data-checker="slow_ops">'):]
    row = row[:row.index("</tr>")]
    assert 'data-verdict="invalid"' in row and "took longer than 10 s" in row


def test_a_checker_without_check_is_refused(own_registry) -> None:
    class Half:
        name = "half"
        sections = ("half",)

        def applies_to(self, run):
            return True

    with pytest.raises(registry.CheckerError, match="checker half: missing the check"):
        registry.register(Half)


def test_a_checker_cannot_fill_a_builtin_section(own_registry) -> None:
    class Impostor:
        name = "impostor"
        sections = ("mine", "queue")

        def applies_to(self, run):
            return True

        def check(self, ctx, runs):
            return []

    with pytest.raises(registry.CheckerError,
                       match="section.s. queue already filled by checker queue and order .builtin."):
        registry.register(Impostor)
    with pytest.raises(registry.CheckerError, match="'stats' is taken by builtin"):
        registry.register(type("Stats", (Impostor,), {"name": "stats", "sections": ("other",)}))


def test_a_broken_checker_plugin_is_reported_and_the_builtins_still_run(tmp_path, monkeypatch,
                                                                         own_registry) -> None:
    monkeypatch.syspath_prepend(str(broken_plugin(tmp_path)))
    registry.load_plugins(reload=True)
    assert any("chaos_broken_checker_missing" in problem for problem in registry.plugin_errors())
    assert [c.name for c in registry.known()][:5] == ["stats", "queue and order", "rto", "perf",
                                                      "linearizability"]


def test_a_checker_that_answers_for_the_wrong_runs_is_unknown_for_every_run() -> None:
    class Short:
        name = "short"
        sections = ("short",)

        def applies_to(self, run):
            return True

        def check(self, ctx, runs):
            return [{"short": {"valid": True}}]

    class Ctx:
        runs = [RunFacts(index=i, run_dir=Path("."), spec=CheckInputs(workload="queue")) for i in range(2)]

    sections = pipeline.checker_sections(Short(), Ctx())
    assert [s["short"]["valid"] for s in sections] == ["unknown", "unknown"]
    assert "1 result(s) for 2 run(s)" in sections[0]["short"]["error"]


def test_runs_a_checker_does_not_apply_to_get_its_not_applicable_sections() -> None:
    class RegisterOnly:
        name = "register only"
        sections = ("register_only",)

        def applies_to(self, run):
            return run.workload == "register"

        def check(self, ctx, runs):
            return [{"register_only": {"valid": False}} for _ in runs]

    class Ctx:
        runs = [RunFacts(index=0, run_dir=Path("."), spec=CheckInputs(workload="register")),
                RunFacts(index=1, run_dir=Path("."), spec=CheckInputs(workload="queue"))]

    first, second = pipeline.checker_sections(RegisterOnly(), Ctx())
    assert first == {"register_only": {"valid": False}}
    assert second == {"register_only": {"valid": True, "checked": False,
                                        "reason": "not applicable to workload 'queue'"}}
