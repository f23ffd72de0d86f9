"""`harness.signals.run_stoppable`: a stop signal cancels the event loop's main task, lets
its `finally` blocks (the heal) finish, joins the loop's threads, then raises `Stopped`;
SIGUSR1 makes a `chaos` command print its stacks. Real signals; no cluster needed."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from harness.signals import Stopped, run_stoppable
from workloads.runner import raise_if_cancelled


def send_later(signum: int, after: float) -> None:
    threading.Timer(after, os.kill, (os.getpid(), signum)).start()


def test_a_stop_signal_cancels_the_task_and_raises_stopped_after_its_heal_and_threads_finish():
    steps: list[str] = []
    heal_thread_done = threading.Event()

    def heal() -> None:  # a blocking heal in the default executor, as the fault schedule's
        time.sleep(0.3)
        heal_thread_done.set()

    async def drive() -> None:
        fault = asyncio.ensure_future(asyncio.to_thread(heal))
        try:
            await asyncio.sleep(30)
            steps.append("not cancelled")
        finally:
            steps.append("finally")
            await asyncio.shield(fault)
            steps.append("healed")

    before = signal.getsignal(signal.SIGTERM)
    send_later(signal.SIGTERM, 0.2)
    began = time.monotonic()
    with pytest.raises(Stopped) as stopped:
        run_stoppable(drive())
    assert stopped.value.signame == "SIGTERM"
    assert steps == ["finally", "healed"] and heal_thread_done.is_set()
    assert time.monotonic() - began < 10
    assert signal.getsignal(signal.SIGTERM) is before


def test_later_signals_only_say_and_do_not_cut_the_clean_up_short():
    said: list[str] = []
    steps: list[str] = []

    async def drive() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            send_later(signal.SIGHUP, 0.05)
            send_later(signal.SIGINT, 0.1)
            deadline = time.monotonic() + 10
            while len(said) < 2 and time.monotonic() < deadline:  # a clean-up the signals must not cancel
                await asyncio.sleep(0.05)
            steps.append("cleaned up")

    send_later(signal.SIGHUP, 0.1)
    with pytest.raises(Stopped) as stopped:
        run_stoppable(drive(), lambda: said.append("please wait"))
    assert stopped.value.signame == "SIGHUP"
    assert steps == ["cleaned up"] and said == ["please wait", "please wait"]


def test_without_a_signal_the_result_comes_back_and_the_handlers_are_restored():
    async def answer() -> int:
        await asyncio.sleep(0.01)
        return 42

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    assert run_stoppable(answer()) == 42
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_an_error_of_the_task_is_raised_as_itself():
    async def broken() -> None:
        raise ValueError("broken workload")

    with pytest.raises(ValueError, match="broken workload"):
        run_stoppable(broken())


def test_a_cancellation_that_wait_for_swallowed_still_stops_a_worker():
    async def worker(ops: list[int]) -> None:
        task = asyncio.current_task()
        task.cancel()
        try:  # what asyncio.wait_for (3.11) does when the result and the cancellation meet
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            pass
        for op in range(3):
            raise_if_cancelled()
            ops.append(op)

    async def main() -> list[int]:
        ops: list[int] = []
        task = asyncio.ensure_future(worker(ops))
        with pytest.raises(asyncio.CancelledError):
            await task
        return ops

    assert asyncio.run(main()) == []


def test_sigusr1_prints_the_stacks_of_a_running_chaos_command(tmp_path):
    """What a stuck run waits for: `kill -USR1 <pid>` (harness.cli.main)."""
    chaos = str(Path(sys.executable).parent / "chaos")
    proc = subprocess.Popen([chaos, "serve", str(tmp_path), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving "), line
        # "serving" is printed just before serve_forever; one answered request says it is in it.
        urllib.request.urlopen(line.split(" on ")[1].split()[0], timeout=30).read()
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "most recent call first" in err and "serve_forever" in err, err
    assert proc.returncode == 0 and "stopped" in out  # the dump did not stop it; SIGTERM did


def test_one_stopping_state_for_nested_blocks_a_second_signal_never_raises_again():
    """A run's loop inside `stop_signals`: the first SIGTERM stops the loop; a second one,
    arriving while `Stopped` unwinds towards the clean-up (the outer handler is back), and
    a third one, inside the clean-up's own loop, only say "wait"."""
    from harness.signals import stop_signals

    said: list[str] = []
    steps: list[str] = []

    async def clean_up() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.2)  # the signal must not cancel the heal
        steps.append("healed")

    with pytest.raises(Stopped):
        with stop_signals(lambda: said.append("outer")):
            try:
                send_later(signal.SIGTERM, 0.1)
                run_stoppable(asyncio.sleep(30), lambda: said.append("loop"))
            except Stopped:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at once, in this frame
                steps.append("unwinding")
                run_stoppable(clean_up(), lambda: said.append("clean-up"))
                raise
    assert steps == ["unwinding", "healed"] and said == ["outer", "clean-up"]
