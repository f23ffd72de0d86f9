"""The store layout (docs/history-format.md): campaigns, runs, latest, run.json without secrets."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness.store import (RunDir, Store, StoreError, check_writable, find_run_dir, new_campaign_id, redact,
                           write_json)


def test_a_new_run_gets_the_run_layout_and_latest_points_at_its_campaign(tmp_path):
    store = Store(tmp_path / "store")
    run = store.new_run("c1", "controller-3-queue-random-kill")
    assert run.path == tmp_path / "store" / "c1" / "runs" / "controller-3-queue-random-kill"
    assert run.history_dir.is_dir() and run.nodes_dir.is_dir()
    assert os.readlink(tmp_path / "store" / "latest") == "c1"  # relative: the store can move
    store.new_run("c2", "x")
    assert store.latest_campaign() == (tmp_path / "store" / "c2").resolve()


def test_a_taken_run_id_gets_a_numbered_suffix(tmp_path):
    store = Store(tmp_path)
    first, second = store.new_run("c", "r"), store.new_run("c", "r")
    assert (first.run_id, second.run_id) == ("r", "r-2")
    assert [r.run_id for r in store.runs("c")] == ["r", "r-2"]


def test_campaign_ids_sort_by_time():
    import datetime as dt
    early = new_campaign_id(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    late = new_campaign_id(dt.datetime(2024, 1, 2, 3, 4, 6, tzinfo=dt.timezone.utc))
    assert early.startswith("20240102T030405Z-") and early < late


def test_a_campaign_id_drawn_twice_in_one_second_is_drawn_again_not_shared(tmp_path, monkeypatch):
    import harness.store as store_module
    tags = iter(["beef", "beef", "cafe"])
    monkeypatch.setattr(store_module, "new_campaign_id", lambda: "20240102T030405Z-" + next(tags))
    store = Store(tmp_path)
    first, second = store.new_campaign("-nightly"), store.new_campaign("-nightly")
    assert (first, second) == ("20240102T030405Z-beef-nightly", "20240102T030405Z-cafe-nightly")
    assert sorted(p.name for p in tmp_path.iterdir()) == [first, second]


def test_secrets_are_redacted_everywhere_in_run_json(tmp_path):
    data = {"inventory": {"nodes": [{"name": "n1", "password": "hunter2", "key_file": "/k"}],
                          "api_token": "abc"},
            "spec": {"seed": 1}, "passphrase": None}
    write_json(tmp_path / "run.json", data)
    text = (tmp_path / "run.json").read_text()
    assert "hunter2" not in text and "abc" not in text
    written = json.loads(text)
    assert written["inventory"]["nodes"][0]["key_file"] == "/k"
    assert written["inventory"]["nodes"][0]["password"] == "<redacted>"
    assert written["spec"] == {"seed": 1}
    assert redact([{"secret": 1}]) == [{"secret": "<redacted>"}]


def test_names_that_only_contain_a_secret_word_are_kept():
    kept = {"passed": 3, "bypass_count": 1, "tokens_seen": 2, "secretary": "x"}
    assert redact(kept) == kept
    assert redact({"ssh-password": "p", "privateKey": "k", "db.pass": "q"}) == {
        "ssh-password": "<redacted>", "privateKey": "<redacted>", "db.pass": "<redacted>"}


def test_a_store_under_a_file_is_not_writable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create directory") as err:
        check_writable(blocker / "store")
    assert "\n" not in str(err.value)
    with pytest.raises(StoreError, match="not a directory"):
        check_writable(blocker)


def test_a_read_only_store_is_not_writable(tmp_path):
    """Permission bits for a user; root writes through them, so it gets a read-only mount."""
    store = tmp_path / "store"
    store.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(store)], check=True)
    else:
        store.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="not writable"):
            check_writable(store)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(store)], check=True)
        store.chmod(0o700)


def test_run_dirs_are_found_from_a_store_a_campaign_or_the_run_itself(tmp_path):
    store = Store(tmp_path)
    run = store.new_run("c", "r")
    write_json(run.run_json, {"run_id": "r"})
    assert find_run_dir(run.path).path == run.path
    assert find_run_dir(tmp_path / "c").path == run.path
    assert find_run_dir(tmp_path).path.resolve() == run.path.resolve()
    store.new_run("c", "r")
    with pytest.raises(StoreError, match="has 2 runs"):
        find_run_dir(tmp_path / "c")
    with pytest.raises(StoreError, match="not a run directory"):
        find_run_dir(tmp_path / "nothing")


def test_run_dir_paths_follow_the_design(tmp_path):
    run = RunDir(tmp_path / "c" / "runs" / "r")
    assert run.nemesis_file.name == "nemesis.jsonl" and run.journal_file.name == "journal.jsonl"
    assert run.results_file.name == "results.json" and run.report_dir.name == "report"
    assert run.checked_dir.name == "checked" and run.campaign_dir == tmp_path / "c"
