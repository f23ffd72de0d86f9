"""Run reports in a real headless Chromium, served by a real `chaos serve`.

One store is made once for the module: a queue run written as raw events (with
a fault window, lost messages, a malformed line and `<script>` values in a
message body, an error text and the run's configuration), a log run with a
stale read, and a bad cas-register history imported from Knossos' test data;
`chaos check` checks them on Spark (real results.json and checked/ tables) and renders their
reports. Screenshots go to build/test-output/reports/.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from support.browser import Loaded, browser  # noqa: F401 - browser is a fixture
from support.ports import free_port
from support.stores import stored
from tests.conftest import require

REPO = Path(__file__).resolve().parent.parent
CHAOS = [str(Path(sys.executable).parent / "chaos")]
BAD_EDN = REPO.parent / "shared" / "testdata" / "knossos" / "cas-register" / "bad" / "cas-failure.edn"
if not BAD_EDN.exists():
    BAD_EDN = Path("/work/shared/testdata/knossos/cas-register/bad/cas-failure.edn")
XSS = "<script>window.__xss = 1</script>"
XSS_NODE = "<img src=x onerror=\"window.__xss = 2\">"
LOST_IDS = (7, 13, 21)

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.jvm]


# -- the store ------------------------------------------------------------------------------

def _event(process, kind, f, key, value, t_ms, node=None, error=None):
    return {"process": process, "type": kind, "f": f, "key": key, "value": value,
            "time": int(t_ms * 1_000_000), "node": node, "error": error}


def queue_events() -> list[dict]:
    """60 sends by 3 producers (one indeterminate in the fault window, one with a
    `<script>` body), polls that consume all but LOST_IDS."""
    events, consumed, t = [], [], 0.0
    for i in range(60):
        process, t = (9 if i == 30 else i % 3), t + 80  # 9 times out once and retires
        payload = XSS if i == 5 else f"m{i}"
        message = {"id": i, "payload": payload}
        events.append(_event(process, "invoke", "send", i % 2, message, t))
        if i == 30:  # inside the fault window: the broker timed out
            events.append(_event(process, "info", "send", i % 2, message, t + 900, XSS_NODE, f"timeout {XSS}"))
            events += [_event(10, "invoke", "send", i % 2, {"id": 1000 + i, "payload": "r"}, t + 950),
                       _event(10, "ok", "send", i % 2, {"id": 1000 + i, "payload": "r"}, t + 1400, "n1")]
            consumed.append((1000 + i, i % 2))
            continue
        events.append(_event(process, "ok", "send", i % 2, {**message, "queue": i % 2, "offset": i // 2},
                             t + 5 + (i % 7), "n1" if i < 30 else "n2"))
        if i not in LOST_IDS:
            consumed.append((i, i % 2))
    for n, start in enumerate(range(0, len(consumed), 10)):
        batch = consumed[start:start + 10]
        t += 50
        events.append(_event(5, "invoke", "poll", None, {"offset": start}, t))
        events.append(_event(5, "ok", "poll", None,
                             [{"id": i, "key": k, "queue": k, "offset": start + j} for j, (i, k) in enumerate(batch)],
                             t + 3, "n1"))
    return events


def write_queue_run(store: Path) -> Path:
    run = store / "20261101T000000Z-aaaa" / "runs" / "controller-3-queue-random-kill"
    (run / "history").mkdir(parents=True)
    (run / "nodes" / "n1" / "broker-a-0").mkdir(parents=True)
    (run / "nodes" / "n1" / "broker-a-0" / "broker.log").write_text(f"started\nerror: {XSS}\n")
    with open(run / "history" / "worker-0.jsonl", "w") as out:
        for event in queue_events():
            out.write(json.dumps(event) + "\n")
        out.write('{"process": 1, "type": "ok", "f"\n')  # a truncated line: reported, not fatal
    (run / "nemesis.jsonl").write_text(
        json.dumps(_event("nemesis", "info", "random-kill", None,
                          {"phase": "start", "targets": ["n2"], "grudge": None}, 2000)) + "\n"
        + json.dumps(_event("nemesis", "info", "random-kill", None, {"phase": "stop", "targets": ["n2"]}, 3500))
        + "\n")
    spec = {"profile": "controller-3", "workload": "queue", "faults": ["random-kill"], "time": 6.0,
            "interval": 2.0, "recovery": 2.0, "seed": 42, "timing": "fast", "note": XSS}
    (run / "run.json").write_text(json.dumps(stored({"kind": "run", "run_id": run.name, "campaign_id": run.parent.parent.name,
                                                     "workload": "queue", "profile": "controller-3", "seed": 42,
                                                     "status": "complete", "spec": spec})))
    (run.parent.parent / "campaign.json").write_text(json.dumps(stored({"campaign_id": run.parent.parent.name,
                                                                        "kind": "ad-hoc", "runs": [run.name]})))
    return run


STALE_READ = dict(process=5, offset=5, at_ms=1600, node="n2")


def log_events() -> list[dict]:
    """A log run: 12 acknowledged appends to queue 0, then reads of offsets 2 and 5 that
    find the values, and between them a stale read: offset 5 read as nothing (from
    STALE_READ's node) after appends up to offset 11 were acknowledged."""
    events = []
    for i in range(12):
        events += [_event(i % 3, "invoke", "append", 0, 100 + i, i * 100),
                   _event(i % 3, "ok", "append", 0, {"offset": i, "value": 100 + i}, i * 100 + 10, "n1")]
    for process, offset, value, t, node in ((4, 2, 102, 1500, "n1"),
                                            (STALE_READ["process"], STALE_READ["offset"], None,
                                             STALE_READ["at_ms"], STALE_READ["node"]),
                                            (4, 5, 105, 1700, "n1")):
        events += [_event(process, "invoke", "read", 0, {"offset": offset}, t),
                   _event(process, "ok", "read", 0, {"offset": offset, "value": value}, t + 3, node)]
    return events


def write_log_run(campaign: Path) -> Path:
    run = campaign / "runs" / "dledger-3-log-leader-kill"
    (run / "history").mkdir(parents=True)
    with open(run / "history" / "worker-0.jsonl", "w") as out:
        out.writelines(json.dumps(event) + "\n" for event in log_events())
    (run / "run.json").write_text(json.dumps(stored({"kind": "run", "run_id": run.name, "campaign_id": campaign.name,
                                                     "workload": "log", "profile": "dledger-3", "status": "complete",
                                                     "spec": {"profile": "dledger-3", "workload": "log"}})))
    listed = json.loads((campaign / "campaign.json").read_text())
    (campaign / "campaign.json").write_text(json.dumps({**listed, "runs": listed["runs"] + [run.name]}))
    return run


def chaos(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([*CHAOS, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode not in (0, 1, 2):
        raise AssertionError(f"chaos {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result


@pytest.fixture(scope="module")
def store() -> Path:
    require(BAD_EDN.exists(), f"{BAD_EDN}: Knossos test data missing (../shared beside the repo)")
    root = Path(tempfile.mkdtemp(prefix="chaos-reports-"))
    write_log_run(write_queue_run(root).parent.parent)
    chaos("import", str(BAD_EDN), "--store", str(root))
    checked = chaos("check", str(root), timeout=900)
    assert checked.returncode == 1, checked.stdout + checked.stderr  # every run is invalid
    assert "report: " in checked.stdout and "chaos serve" in checked.stdout
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def server(store: Path):
    port = free_port()
    proc = subprocess.Popen([*CHAOS, "serve", str(store), "--port", str(port)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
    yield proc, f"http://127.0.0.1:{port}"
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_url(base: str, store: Path, name: str, page: str = "index.html") -> str:
    run = next(store.glob(f"*/runs/{name}"))
    return f"{base}/{run.relative_to(store).as_posix()}/report/{page}"


# -- the tests --------------------------------------------------------------------------------

def test_store_index_lists_campaigns_newest_first_with_links_to_reports(server, store, browser):
    _, base = server
    loaded = Loaded(browser, base + "/", "store-index")
    ids = loaded.page.eval_on_selector_all("section.campaign", "els => els.map(e => e.dataset.campaign)")
    assert ids == sorted(ids, reverse=True) and len(ids) == 2
    links = loaded.page.eval_on_selector_all("section.campaign a[href$='report/index.html']",
                                             "els => els.map(e => e.getAttribute('href'))")
    assert len(links) == 3
    assert loaded.errors == []


def test_queue_run_report_loads_without_console_errors_and_every_chart_has_points(server, store, browser):
    _, base = server
    loaded = Loaded(browser, run_url(base, store, "controller-3-queue-random-kill"), "queue-run-report")
    assert loaded.errors == []
    points = loaded.chart_points()
    assert {"rto-chart", "latency-chart", "throughput-chart", "quantiles-chart"} <= set(points)
    assert all(count > 0 for count in points.values()), points
    rendered = loaded.page.evaluate("() => document.querySelectorAll('div.chart[data-rendered]').length")
    assert rendered == len(points)
    verdict = loaded.page.text_content("tr[data-checker=queue] .verdict")
    assert "invalid" in verdict
    lost = loaded.page.text_content("#queue-lost")
    assert "lost: 3 messages" in lost
    ids = loaded.page.eval_on_selector_all("table[data-category=lost] tbody tr td:first-child",
                                           "els => els.map(e => e.textContent)")
    assert sorted(int(x) for x in ids) == list(LOST_IDS)
    header = loaded.page.eval_on_selector_all("table[data-category=lost] th", "els => els.map(e => e.textContent)")
    assert {"id", "queue", "offset", "sent at (s)", "acked at (s)", "node that acked"} <= set(header)
    csv_link = loaded.page.get_attribute("#queue-lost + p a[href$='.csv']", "href")
    assert loaded.page.request.get(loaded.page.url.rsplit("/", 1)[0] + "/" + csv_link).text().count("\n") == 4
    assert "truncated or garbled" in loaded.page.text_content("#history-input")
    log = loaded.page.get_attribute("#logs a", "href")
    assert log == "../nodes/n1/broker-a-0/broker.log"
    assert XSS in loaded.page.request.get(loaded.page.url.rsplit("/", 1)[0] + "/" + log).text()


def test_injected_script_values_render_as_text_and_never_execute(server, store, browser):
    _, base = server
    loaded = Loaded(browser, run_url(base, store, "controller-3-queue-random-kill", "timeline.html"), "queue-timeline")
    assert loaded.errors == []
    # move the mouse onto the operation whose node and error carry markup: plotly shows them as text
    spot = loaded.page.evaluate("""() => {
        const gd = document.getElementById('timeline');
        gd.scrollIntoView();
        const hit = row => row.some(v => String(v).includes('timeout'));
        const trace = gd.data.find(t => t.mode === 'markers' && (t.customdata || []).some(hit));
        const p = trace.customdata.findIndex(hit);
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
        return {x: box.left + xa._offset + xa.l2p(trace.x[p]), y: box.top + ya._offset + ya.l2p(trace.y[p])}; }""")
    loaded.page.mouse.move(spot["x"], spot["y"])
    loaded.page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    hovered = loaded.page.text_content(".hoverlayer")
    assert XSS in hovered and "onerror" in hovered, hovered
    assert loaded.page.evaluate("() => window.__xss") is None
    report = Loaded(browser, run_url(base, store, "controller-3-queue-random-kill"), "queue-run-report-xss")
    assert XSS in report.page.text_content("#configuration")
    assert report.page.evaluate("() => window.__xss") is None
    assert report.page.evaluate("() => document.querySelectorAll('img[src=x]').length") == 0


def test_timeline_draws_every_operation_in_a_lane_per_process(server, store, browser):
    _, base = server
    loaded = Loaded(browser, run_url(base, store, "controller-3-queue-random-kill", "timeline.html"), "timeline")
    lanes = loaded.page.evaluate("""() => { const gd = document.getElementById('timeline');
        const hover = gd.data.filter(t => t.type === 'scattergl' && t.customdata);
        return {ops: hover.reduce((n, t) => n + t.x.length, 0), lanes: new Set(hover.flatMap(t => t.y)).size,
                bars: gd.data.filter(t => / bars$/.test(t.name)).reduce((n, t) => n + t.error_x.array.length, 0),
                gl: !!gd.querySelector('canvas')}; }""")
    assert lanes["ops"] == lanes["bars"] == 60 + 1 + 6  # sends, the retry, polls: all under the bar budget
    assert lanes["lanes"] == 3 + 1 + 1 + 1 and lanes["gl"]
    zoomed = loaded.page.evaluate("""async () => { const gd = document.getElementById('timeline');
        await Plotly.relayout(gd, {'xaxis.range[0]': 0, 'xaxis.range[1]': 1});
        return gd.data.filter(t => / bars$/.test(t.name)).reduce((n, t) => n + t.error_x.array.length, 0); }""")
    assert zoomed == 12  # the bars redrawn for the zoomed range: the sends invoked in the first second
    assert loaded.errors == []  # producers, the retired one, its successor, poller


def test_invalid_register_run_shows_counterexample_lanes_with_the_failing_op(server, store, browser):
    _, base = server
    loaded = Loaded(browser, run_url(base, store, "import-cas-failure"), "register-counterexample")
    assert loaded.errors == []
    assert all(count > 0 for count in loaded.chart_points().values())
    lanes = loaded.page.evaluate("""() => { const gd = document.querySelector('.counterexample div.chart');
        const bars = gd.data.filter(t => t.type === 'bar');
        return {lanes: new Set(bars.flatMap(t => t.y)).size,
                failing: bars.flatMap(t => t.marker.color).filter(c => c === '#000000').length,
                drawn: gd.querySelectorAll('.bars .point').length}; }""")
    assert lanes["lanes"] >= 2 and lanes["failing"] == 1 and lanes["drawn"] > 2
    text = loaded.page.text_content(".counterexample")
    assert "could not be linearized" in text and "Final configurations" in text
    assert loaded.page.locator(".counterexample table tbody tr").count() >= 1


def test_timeline_draws_the_counterexample_with_its_prefix_the_op_that_could_not_be_placed_and_the_states(
        server, store, browser):
    _, base = server
    loaded = Loaded(browser, run_url(base, store, "import-cas-failure", "timeline.html"), "register-timeline-counterexample")
    assert loaded.errors == []
    run = next(store.glob("*/runs/import-cas-failure"))
    failure = json.loads((run / "results.json").read_text())["checkers"]["linearizable"]["failures"][0]
    named = loaded.page.text_content("#counterexample .failing-op")
    assert named.startswith(f"#{failure['op']['index']} process {failure['op']['process']} {failure['op']['f']}")
    roles = loaded.page.evaluate("""() => { const gd = document.querySelector('#counterexample div.chart');
        return Object.fromEntries(gd.data.map(t => [t.name, t.customdata.map(c => c[0])])); }""")
    assert roles["could not be linearized"] == [failure["op"]["index"]]
    assert roles["linearizable prefix"] and max(roles["linearizable prefix"]) < failure["op"]["index"]
    states = loaded.page.locator("#counterexample table tbody tr").count()
    assert states == len(failure["configs"]) >= 1


def test_a_log_run_s_stale_read_is_marked_at_the_read_that_found_nothing(server, store, browser):
    _, base = server
    run = next(store.glob("*/runs/dledger-3-log-leader-kill"))
    stale = json.loads((run / "results.json").read_text())["checkers"]["queue"]["poll_skip"]
    assert [(row["offset"], row["read_at_s"]) for row in stale] == [(STALE_READ["offset"], STALE_READ["at_ms"] / 1000)]
    loaded = Loaded(browser, run_url(base, store, run.name, "timeline.html"), "log-stale-read")
    assert loaded.errors == []
    marker = loaded.page.evaluate("""() => { const gd = document.getElementById('timeline');
        const t = gd.data.find(t => t.meta && t.meta.anomaly === 'poll_skip');
        return {x: t.x, y: t.y, anchors: t.customdata.map(c => c[0])}; }""")
    # on the read that found nothing, not on the later read of offset 5 that found its value
    assert marker == {"x": [(STALE_READ["at_ms"] + 3) / 1000], "y": [STALE_READ["process"]], "anchors": ["poll_skip-0"]}
    loaded.page.click('a[data-anomaly="poll_skip-0"]')
    details = loaded.page.text_content("#anomaly-details")
    assert f"read (ok) by process {STALE_READ['process']}" in details and f"on {STALE_READ['node']}" in details


def _raw_get(base: str, path: str) -> int:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", path)  # sent as is: no client-side normalisation of ..
    status = connection.getresponse().status
    connection.close()
    return status


def test_serve_refuses_path_traversal_and_symlinks_out_of_the_store(server, store):
    _, base = server
    link = store / "escape"
    link.symlink_to("/etc")
    try:
        assert _raw_get(base, "/../../etc/passwd") == 404
        assert _raw_get(base, "/%2e%2e/%2e%2e/etc/passwd") == 404
        assert _raw_get(base, "/escape/passwd") == 404
        assert _raw_get(base, "/escape/") == 404
        report = next(store.glob("*/runs/import-cas-failure/report/index.html")).relative_to(store)
        assert _raw_get(base, "/" + report.as_posix()) == 200
    finally:
        link.unlink()


def test_serve_listens_on_loopback_and_stops_cleanly_on_ctrl_c(server):
    proc, base = server
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"on {base}/" in out  # 127.0.0.1 unless --bind says otherwise
    assert "stopped" in out and "Traceback" not in err
