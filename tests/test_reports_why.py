"""Why a run failed, split brains on the role lanes, small samples on compare.html,
axis titles, the one counterexample figure, and serve's text logs and gzip (no cluster)."""
from __future__ import annotations

import gzip
import http.client
import threading
from pathlib import Path

from harness.campaign import load_campaign, plan
from harness.campaign.plan import run_spec
from harness.run import fault_schedule

from reports import stats, why
from reports.campaign import render_campaign
from reports.charts import base_layout
from reports.history import History
from reports.serve import make_server
from reports.timeline import cluster_spans, counterexample_figure, story_figure
from support.ports import free_port
from support.stores import make_campaign, results

NS = 1_000_000_000


def state(t_s: float, members: dict[str, str], epoch: int | None, sss: list[str] | None = None) -> dict:
    master = next((n for n, r in sorted(members.items(), key=lambda kv: -1 if kv[1] == "master" else 0)
                   if r == "master"), None)
    return {"time": int(t_s * NS), "groups": {"broker-a": {"master": master, "epoch": epoch, "term": None,
                                                           "sync_state_set": sss, "members": members}},
            "controller": None, "nodes": {}}


# n2 master at epoch 1; n2 is cut off at 4 s; n1 elected at epoch 2 at 5.2 s while n2 still says master
# until the partition heals at 10.1 s.
STATES = [state(0.1, {"n1": "slave", "n2": "master", "n3": "slave"}, 1, ["n1", "n2", "n3"]),
          state(5.2, {"n1": "master", "n2": "master", "n3": "slave"}, 2, ["n1", "n3"]),
          state(10.1, {"n1": "master", "n2": "slave", "n3": "slave"}, 2, ["n1", "n3"]),
          state(15.3, {"n1": "master", "n2": "master", "n3": "slave"}, 3, ["n2", "n3"])]
WINDOWS = [{"id": 0, "fault": "leader-partition", "targets": ["n2"], "start_s": 4.02, "stop_s": 10.09},
           {"id": 1, "fault": "leader-partition", "targets": ["n1"], "start_s": 14.0, "stop_s": 20.0}]


def lost_rows() -> dict[str, list[dict]]:
    rows = [{"id": f"a{i}", "acked_at_s": 6.0 + i / 100, "acked_by": "n2"} for i in range(5)]
    rows += [{"id": f"b{i}", "acked_at_s": 16.0 + i / 100, "acked_by": "n1"} for i in range(3)]
    rows += [{"id": "c", "acked_at_s": 4.5, "acked_by": "n2"}]
    return {"lost": rows}


def test_findings_name_the_window_the_acknowledging_node_and_the_masters_with_their_epoch():
    found = why.findings(lost_rows(), WINDOWS, STATES)
    assert [(f.window["id"], f.node, f.count) for f in found] == [(0, "n2", 6), (1, "n1", 3)]
    first = found[0]
    assert first.first_s == 4.5 and first.last_s == 6.04 and first.targeted
    assert first.sentence() == ("6 acknowledged messages lost that n2 acknowledged during window #0 "
                                "(leader-partition on n2, 4.02–10.09 s) between 4.50 and 6.04 s; "
                                "n2 was a target of that fault.")
    texts = {s.count: s.text(first.node) for s in first.states}
    assert texts[5] == ("broker-a: n1 and n2 both claimed master at once (split brain; the group reports n1 at "
                        "epoch 2), SyncStateSet {n1, n3}")
    assert texts[1] == "broker-a: n2 was master at epoch 1, SyncStateSet {n1, n2, n3}"
    assert why.summary(found) == ("9 acknowledged writes were lost: 6 by n2 in window #0 (leader-partition) "
                                  "and 3 by n1 in window #1 (leader-partition).")
    assert why.lost_by_window(found) == {0: 6, 1: 3}


def test_a_write_acknowledged_outside_every_window_or_by_no_known_node_says_so():
    found = why.findings({"lost": [{"id": "x", "acked_at_s": 12.0, "acked_by": None}]}, WINDOWS, [])
    assert len(found) == 1 and found[0].window is None
    assert "an unknown node" in found[0].sentence() and "outside every fault window" in found[0].sentence()
    assert found[0].states == []
    assert why.lost_by_window(found) == {}


def test_split_brains_are_the_spans_with_two_members_claiming_master():
    spans = why.split_brains(STATES)
    assert spans == [{"group": "broker-a", "nodes": ["n1", "n2"], "start_s": 5.2, "stop_s": 10.1},
                     {"group": "broker-a", "nodes": ["n1", "n2"], "start_s": 15.3, "stop_s": None}]


def test_role_lanes_draw_one_lane_per_member_so_two_masters_overlap_in_time():
    spans = cluster_spans(STATES, WINDOWS, 20.0)
    masters = [s for s in spans if s.data[0] == "role-master"]
    lanes = {s.lane for s in masters}
    assert lanes == {"broker-a n1", "broker-a n2"}
    n1 = [s for s in masters if s.lane == "broker-a n1"]
    n2 = [s for s in masters if s.lane == "broker-a n2"]
    assert any(a.start < b.stop and b.start < a.stop for a in n1 for b in n2)   # both master at once
    assert {s.label for s in n1} == {"master · epoch 2", "master · epoch 3"}
    # n2 still says master while cut off: the group's epoch is n1's, not given to n2
    assert [s.label for s in n2] == ["master · epoch 1", "master", "master"]
    # the role colours are not the node or fault colours
    from reports.charts import FAULT_PALETTE
    assert not {s.colour for s in spans if s.data[0].startswith("role-")} & set(FAULT_PALETTE)


def test_a_comparison_below_the_least_n_says_too_few_samples_and_runs_no_test():
    assert stats.min_samples() == 4
    assert stats.smallest_p(2, 2) >= stats.ALPHA and stats.smallest_p(4, 4) < stats.ALPHA
    small = stats.compare([1.0, 1.1], [5.0, 5.1], ("a", "b"))
    assert not small.tested and small.p_value is None and "too few samples" in small.note
    enough = stats.compare([1.0, 1.1, 1.2, 1.3], [5.0, 5.1, 5.2, 5.3], ("a", "b"))
    assert enough.tested and enough.significant and enough.faster == "a"


def test_compare_page_with_two_windows_per_mode_says_too_few_samples_with_n_beside_each_figure(tmp_path):
    runs = []
    for repeat in (1, 2):
        runs += [{"profile": "dledger-3", "fault": "leader-kill", "repeat": repeat, "seed": repeat,
                  "results": results(True, rto=[1.0 + repeat])},
                 {"profile": "controller-3", "fault": "leader-kill", "repeat": repeat, "seed": repeat,
                  "results": results(True, rto=[9.0 + repeat])}]
    campaign = make_campaign(tmp_path, "20240101T000000Z-aaaa-smoke", runs)
    render_campaign(campaign)
    html = (campaign / "compare.html").read_text()
    assert "Too few samples for a conclusion: 2 vs 2 leader-kill windows; at least 4 per mode are needed." in html
    assert 'data-tested="no"' in html and "no significant difference" not in html
    assert "(n = 2, too few samples for an interval)" in html and "[" not in html.split("(n = 2")[0][-12:]
    assert "dledger-3 n = 2, controller-3 n = 2" in html   # in both chart titles
    assert html.count("dledger-3 n = 2, controller-3 n = 2") == 2


def test_axis_titles_are_objects_and_log_axes_tick_once_per_decade():
    layout = base_layout("t", xaxis_title="time (s)", yaxis=dict(type="log", title="latency (ms)"))
    assert layout["xaxis"]["title"] == {"text": "time (s)", "standoff": 8}
    assert layout["yaxis"]["title"]["text"] == "latency (ms)" and layout["yaxis"]["dtick"] == 1


def history(rows: list[tuple]) -> History:
    columns: dict[str, list] = {name: [] for name in ("index", "process", "f", "key", "invoke_value", "value",
                                                      "type", "node", "error", "invoke_time", "complete_time")}
    for index, (process, f, start, stop, kind, value) in enumerate(rows):
        for name, v in dict(index=index, process=process, f=f, key="k", invoke_value=None, value=value, type=kind,
                            node="n1", error=None, invoke_time=int(start * NS),
                            complete_time=int(stop * NS) if stop is not None else None).items():
            columns[name].append(v)
    return History(columns)


def test_the_one_counterexample_figure_labels_the_failing_and_the_previous_ok_op():
    h = history([(0, "write", 0.1, 0.2, "ok", 1), (1, "read", 0.3, 0.4, "ok", 2), (0, "read", 0.5, 0.6, "ok", 9)])
    figure = counterexample_figure(h, [0, 1, 2], failing=2, previous_ok=1)
    roles = {t["meta"]["role"] for t in figure["data"]}
    assert roles == {"linearizable prefix", "could not be linearized"}
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["cannot be linearized", "previous ok"]
    assert figure["layout"]["xaxis"]["title"]["text"] == "time since run start (s)"


def test_story_figure_titles_its_axes_as_objects():
    h = history([(0, "send", 0.1, 0.2, "ok", 1)])
    layout = story_figure(h, WINDOWS, STATES, {})["layout"]
    assert layout["yaxis"]["title"]["text"] == "process"
    assert layout["xaxis"]["title"]["text"] == "time since run start (s)"


def fetch(port: int, path: str, gzip_ok: bool) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Accept-Encoding": "gzip"} if gzip_ok else {})
    return conn.getresponse()


def test_serve_sends_logs_as_text_and_compresses_pages_for_clients_that_accept_gzip(tmp_path):
    page = "<html>" + "report " * 2000 + "</html>"
    (tmp_path / "c" / "runs" / "r" / "nodes" / "n1").mkdir(parents=True)
    (tmp_path / "c" / "index.html").write_text(page)
    (tmp_path / "c" / "runs" / "r" / "nodes" / "n1" / "broker.log.1").write_text("INFO started\n")
    server = make_server(tmp_path, port=free_port())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        log = fetch(port, "/c/runs/r/nodes/n1/broker.log.1", gzip_ok=False)
        assert log.getheader("Content-Type") == "text/plain; charset=utf-8" and log.read() == b"INFO started\n"
        zipped = fetch(port, "/c/index.html", gzip_ok=True)
        body = zipped.read()
        assert zipped.getheader("Content-Encoding") == "gzip" and len(body) < len(page) / 10
        assert gzip.decompress(body).decode() == page
        plain = fetch(port, "/c/index.html", gzip_ok=False)
        assert plain.getheader("Content-Encoding") is None and plain.read().decode() == page
        index = fetch(port, "/", gzip_ok=True)
        assert index.getheader("Content-Encoding") == "gzip" and b"campaign" in gzip.decompress(index.read())
    finally:
        server.shutdown()
        server.server_close()


def test_the_rocketmq_comparison_campaign_gives_compare_html_enough_windows_per_mode_and_fault():
    campaign = load_campaign(Path(__file__).resolve().parents[1] / "campaigns" / "rocketmq-compare.yaml")
    windows: dict[tuple[str, str], int] = {}
    for run in plan(campaign).runs:
        starts = sum(1 for e in fault_schedule(run_spec(campaign, run, Path("store"), inventory=None))
                     if e.phase == "start")
        windows[(run.profile, run.fault)] = windows.get((run.profile, run.fault), 0) + starts
    assert set(windows) == {(p, f) for p in ("rmq-dledger-3", "rmq-controller-3")
                            for f in ("leader-kill", "leader-partition")}
    assert min(windows.values()) >= 3 * stats.min_samples() == 12


def test_nemesis_and_lost_tables_say_targets_grudges_and_windows_in_words():
    from reports.campaign import lost_example
    from reports.run_report import grudge_text, targets_text
    assert targets_text(["n2"]) == "n2" and targets_text([]) == "none" and targets_text(None) == "–"
    assert grudge_text({"n1": ["n2"], "n2": ["n1", "n3"], "n3": []}) == "n1 cannot reach n2; n2 cannot reach n1, n3"
    assert grudge_text(None) == "–"
    row = lost_example({"id": "149", "key": "1", "sends": 1, "send_outcome": "ok", "first_send_s": 4.5,
                        "consumed": 0, "same_offset": None}, WINDOWS)
    assert row == {"id": "149", "queue": "1", "sends": 1, "outcome": "ok", "sent_at_s": 4.5, "consumed": 0,
                   "window": "#0 leader-partition"}
    assert lost_example({"id": "x", "first_send_s": 12.0}, WINDOWS)["window"] == "outside the fault windows"
