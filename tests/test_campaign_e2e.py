"""`chaos campaign` end to end on real local nodes, real Spark and a real browser.

The smoke campaign (campaigns/smoke.yaml) with shorter durations: both HA modes
and controller-unclean under a master kill and a master partition; the resume
test stops a two-run campaign with SIGTERM in its second run and resumes it.
Full form (CHAOS_LONG unset or "full"): the smoke file's durations. CI's short
form (CHAOS_LONG=short): 10 s runs with one 5 s fault window each.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nuclei import net
from tests.conftest import finish, require
from support.browser import Loaded, browser  # noqa: F401 - browser is a fixture
from support.ports import free_port

REPO = Path(__file__).resolve().parent.parent
CHAOS = str(Path(sys.executable).parent / "chaos")
FULL = os.environ.get("CHAOS_LONG") != "short"
SHORT_DURATIONS = {"run": 10, "between": 2, "fault": 5, "recovery": 4, "drain_timeout": 20}

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark]


def campaign_file(tmp_path: Path, nodes: Path | int, **changes) -> Path:
    """campaigns/smoke.yaml on the test's cluster (an inventory file) or on a local cluster
    of its own (a node count), with short durations when CHAOS_LONG=short."""
    data = yaml.safe_load((REPO / "campaigns" / "smoke.yaml").read_text())
    data["inventory"] = {"nodes": nodes} if isinstance(nodes, int) else {"file": str(nodes)}
    if not FULL:
        data["durations"] = SHORT_DURATIONS
    data.update(changes)
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def chaos_campaign(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([CHAOS, "campaign", *args, "--quiet"], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def only_campaign(store: Path) -> Path:
    found = [p for p in store.iterdir() if (p / "campaign.json").is_file() and not p.is_symlink()]
    assert len(found) == 1, found
    return found[0]


def matrix(index_html: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """What index.html says per cell: verdict and the runs (id, seed) it links."""
    cells = {}
    for match in re.finditer(r'data-cell="([^"]+)" data-verdict="([^"]+)">(.*?)</td>', index_html, re.S):
        runs = tuple(re.findall(r'data-run="([^"]+)" data-seed="(\d+)"', match.group(3)))
        cells[match.group(1)] = (match.group(2), runs)
    return cells


def gate_results(index_html: str) -> dict[str, str]:
    return dict(re.findall(r'data-gate="([^"]+)" data-passed="(\w+)"', index_html))


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, pool = make_cluster(5)
    return inventory, pool


@pytest.fixture(scope="module")
def smoke(cluster, tmp_path_factory):
    inventory, _ = cluster
    tmp = tmp_path_factory.mktemp("smoke")
    store = tmp / "store"
    began = time.monotonic()
    result = chaos_campaign(str(campaign_file(tmp, inventory.source)), "--store", str(store))
    print(f"\nsmoke campaign: {time.monotonic() - began:.0f}s wall")
    return result, store


def test_the_smoke_campaign_passes_its_gates_and_catches_controller_unclean(smoke):
    result, store = smoke
    assert result.returncode == 0, result.stdout + result.stderr
    campaign = only_campaign(store)
    index_line, serve_line = result.stdout.splitlines()[-2:]
    assert index_line == f"index: {campaign / 'index.html'}"
    assert serve_line.startswith("browse: chaos serve ")
    assert re.search(r"controller-unclean .*INVALID", result.stdout)       # the summary table
    html = (campaign / "index.html").read_text()
    cells = matrix(html)
    assert set(cells) == {f"{p}|queue|{f}" for p in ("dledger-3", "controller-3", "controller-unclean")
                          for f in ("leader-kill", "leader-partition")}
    for cell, (verdict, runs) in cells.items():
        expected = "False" if cell.startswith("controller-unclean|queue|leader-partition") else None
        if expected:
            assert verdict == expected, cell
        elif not cell.startswith("controller-unclean"):
            assert verdict == "True", (cell, verdict)
        assert len(runs) == 1
    assert set(gate_results(html).values()) == {"yes"}
    # the expected-unsafe profile's lost messages are listed by id
    lost_section = html[html.index('id="lost"'):]
    run = json.loads((campaign / "runs" / "controller-unclean-queue-leader-partition-r1" / "results.json").read_text())
    lost = run["checkers"]["queue"]["lost"]
    assert lost and all(str(m["id"]) in lost_section for m in lost[:5])
    # both modes on compare.html, same seeds per fault
    compare = (campaign / "compare.html").read_text()
    assert 'data-mode="dledger"' in compare and 'data-mode="controller"' in compare
    seeds = {cell.split("|")[2]: {s for _, s in runs} for cell, (_, runs) in cells.items()}
    assert all(len(s) == 1 for s in seeds.values())
    # one Spark session for the whole campaign: one spark.log, one batch check
    meta = json.loads((campaign / "campaign.json").read_text())
    assert meta["status"] == "complete" and "check_s" in meta["timings"]
    print("smoke timings:", json.dumps(meta["timings"]))


@pytest.mark.browser
def test_the_smoke_campaign_pages_load_in_chromium_with_every_chart_drawn(smoke, browser):  # noqa: F811
    _, store = smoke
    require(Path("/usr/bin/chromium").exists(), "/usr/bin/chromium missing")
    port = free_port()
    server = subprocess.Popen([CHAOS, "serve", str(store), "--port", str(port)], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "chaos serve did not start"
                time.sleep(0.2)
        campaign = only_campaign(store).name
        base = f"http://127.0.0.1:{port}"
        for page, shot in ((f"{campaign}/index.html", "campaign-index"), (f"{campaign}/compare.html", "campaign-compare"),
                           ("trend.html", "campaign-trend")):
            loaded = Loaded(browser, f"{base}/{page}", shot)
            assert loaded.errors == [], (page, loaded.errors)
            points = loaded.chart_points()
            assert all(count > 0 for count in points.values()), (page, points)
        assert len(Loaded(browser, f"{base}/{campaign}/compare.html", "campaign-compare").chart_points()) == 4
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def state(store: Path) -> dict:
    try:
        return json.loads(only_campaign(store).joinpath("campaign.json").read_text())
    except (AssertionError, OSError, ValueError):
        return {}


def nothing_left(pool, inventory) -> list[str]:
    """SUT processes or our iptables rules still on any node."""
    left = []
    for node in inventory.nodes:
        left += [f"{node.name}: {rule}" for rule in net.chain_rules(pool, node.name)]
        out = pool.run(node, f"pgrep -af 'sut (broker|namesrv|controller) --config {node.workdir}' || true").stdout
        left += [f"{node.name}: {line}" for line in out.splitlines() if line.strip()]
    return left


def stop_campaign(path: Path, store: Path, signum: int, ready, before) -> tuple[int, str, str]:
    """Start `chaos campaign`, wait until `ready()`, call `before(proc)`, send `signum`;
    the exit code and output once it has cleaned up."""
    proc = subprocess.Popen([CHAOS, "campaign", str(path), "--store", str(store), "--quiet"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ready() or proc.poll() is not None, 600, "the moment to stop the campaign")
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the campaign ended (exit {proc.returncode}) before the moment to stop it:\n{out}{err}")
        before(proc)
        proc.send_signal(signum)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    out, err = finish(proc, 300)
    return proc.returncode, out, err


def test_a_campaign_stopped_by_sigterm_heals_and_resumes_to_the_same_pages(cluster, tmp_path):
    inventory, pool = cluster
    changes = {"name": "resume", "profiles": ["dledger-3", "controller-3"], "faults": ["leader-kill"]}
    path = campaign_file(tmp_path, inventory.source, **changes)
    stopped = tmp_path / "stopped"
    first, second = "dledger-3-queue-leader-kill-r1", "controller-3-queue-leader-kill-r1"
    code, out, _ = stop_campaign(
        path, stopped, signal.SIGTERM,
        ready=lambda: state(stopped).get("done", {}).get(second, {}).get("status") == "running"
        and (only_campaign(stopped) / "runs" / second / "nemesis.jsonl").exists(),
        before=lambda proc: time.sleep(3))  # well inside the second run's workload
    assert code == 130 and "--resume" in out, out
    meta = state(stopped)
    assert meta["status"] == "interrupted" and meta["done"][first]["status"] == "complete"
    assert meta["done"][second]["status"] == "interrupted"
    assert nothing_left(pool, inventory) == []

    resumed = chaos_campaign(str(path), "--store", str(stopped), "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1 of 2 runs to go" in resumed.stderr
    campaign = only_campaign(stopped)
    assert (campaign / "interrupted" / f"{second}.1").is_dir()      # the cut-short attempt, kept

    fresh = tmp_path / "fresh"
    straight = chaos_campaign(str(path), "--store", str(fresh))
    assert straight.returncode == 0, straight.stdout + straight.stderr
    after_resume = (campaign / "index.html").read_text()
    uninterrupted = (only_campaign(fresh) / "index.html").read_text()
    assert matrix(after_resume) == matrix(uninterrupted) and len(matrix(after_resume)) == 2
    assert gate_results(after_resume) == gate_results(uninterrupted)
    assert 'data-status="complete"' in after_resume


def test_sighup_mid_run_heals_and_takes_down_the_cluster_the_campaign_brought_up(tmp_path):
    from inventory import netns
    path = campaign_file(tmp_path, 4, name="hangup", profiles=["dledger-3"], faults=["leader-partition"])
    store = tmp_path / "store"
    run = "dledger-3-queue-leader-partition-r1"
    ours = []
    code, out, err = stop_campaign(
        path, store, signal.SIGHUP,
        ready=lambda: bool(state(store)) and "start" in _text(only_campaign(store) / "runs" / run / "nemesis.jsonl"),
        before=lambda proc: ours.extend(r for r in netns.clusters() if r.owner_pid == proc.pid))
    assert code == 130 and len(ours) == 1, out + err
    assert state(store)["status"] == "interrupted" and state(store)["done"][run]["status"] == "interrupted"
    tag = ours[0].tag
    assert not [r for r in netns.clusters() if r.tag == tag]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert tag not in names


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
