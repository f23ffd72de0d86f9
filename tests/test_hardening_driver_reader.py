"""The RocketMQ driver's reader against a driver that breaks the protocol.

A fake driver (a small Python script speaking the JSON-lines protocol) stands in for the
JVM: it answers `ping`, never answers `hang`, and answers `bad` with one malformed line.
Each malformed shape must mark the driver dead, so the request in flight, a request
still pending and every later request fail with DriverDied (indeterminate) instead of
hanging, and a SharedDriver starts a new driver on the next acquire.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from sut.rocketmq import driver as driver_module
from sut.rocketmq.driver import Driver, DriverDied, SharedDriver, classify_error

FAKE_DRIVER = r'''
import json, sys
bad = sys.argv[1]
if bad == "DEEP":  # too long for argv: made here
    bad = "[" * 200_000 + "]" * 200_000
print(json.dumps({"ready": True, "pid": 0}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "ping":
        print("a library's chatter, not JSON", flush=True)
        print(json.dumps({"id": request["id"], "ok": True, "result": "pong"}), flush=True)
    elif request["op"] == "bad":
        print(bad.replace("ID", str(request["id"])), flush=True)
'''

BAD_LINES = {
    "a list": "[1, 2, 3]",
    "a string": '"ID"',
    "a number": "ID",
    "null": "null",
    "an id that is a list": '{"id": [ID], "ok": true, "result": "pong"}',
    "an id that is a string": '{"id": "ID", "ok": true, "result": "pong"}',
    "an id that is true": '{"id": true, "ok": true, "result": "pong"}',
    "no id": '{"ok": true, "result": "pong"}',
    "an error that is a string": '{"id": ID, "ok": false, "error": "boom"}',
    "an error whose code is a list": '{"id": ID, "ok": false, "error": {"class": "MQBrokerException", "code": [1]}}',
    "an error whose class is an object": '{"id": ID, "ok": false, "error": {"class": {}, "message": "x"}}',
    "an ok that is a string": '{"id": ID, "ok": "yes", "result": "pong"}',
    "nesting too deep to parse": "DEEP",
}


@pytest.fixture
def fake_driver(tmp_path, monkeypatch):
    """Point Driver at the fake script; returns a setter for the malformed line."""
    script = tmp_path / "fake_driver.py"
    script.write_text(FAKE_DRIVER)
    shape = {"line": "null"}

    def command(java=None, lib=None, jar=None, log_dir=None):
        return [sys.executable, str(script), shape["line"]]

    monkeypatch.setattr(driver_module, "driver_command", command)
    return shape


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_a_malformed_driver_line_fails_pending_and_later_requests_and_ends_the_driver(fake_driver, tmp_path, name):
    fake_driver["line"] = BAD_LINES[name]
    driver = Driver(log_dir=tmp_path / "log").start(timeout=30)
    try:
        assert driver.call("ping", timeout=10) == "pong"   # chatter is skipped, answers arrive
        pending = driver.submit("hang")
        in_flight = driver.submit("bad")
        for future in (in_flight, pending):
            with pytest.raises(DriverDied, match="broke the protocol|reading the driver failed") as died:
                future.result(timeout=20)
            assert classify_error(died.value) == "info"
        assert not driver.alive
        with pytest.raises(DriverDied):
            driver.call("ping", timeout=5)
        assert _gone(driver.pid)
    finally:
        driver.close()


def test_a_shared_driver_starts_a_new_driver_after_a_malformed_line(fake_driver, tmp_path):
    fake_driver["line"] = BAD_LINES["an error that is a string"]
    shared = SharedDriver(linger_s=0.1, log_dir=tmp_path / "log")
    try:
        first = shared.acquire()
        with pytest.raises(DriverDied):
            first.call("bad", timeout=20)
        shared.release()
        second = shared.acquire()
        assert second is not first and second.alive
        assert second.call("ping", timeout=10) == "pong"
        shared.release()
    finally:
        shared.close()


def test_a_well_formed_error_answer_still_reaches_the_caller(fake_driver, tmp_path):
    fake_driver["line"] = '{"id": ID, "ok": false, "error": {"class": "MQBrokerException", "code": 2, "message": "busy"}}'
    driver = Driver(log_dir=tmp_path / "log").start(timeout=30)
    try:
        with pytest.raises(driver_module.DriverError) as error:
            driver.call("bad", timeout=10)
        assert classify_error(error.value) == "fail" and driver.alive
    finally:
        driver.close()
