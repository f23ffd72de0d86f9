"""Drive a workload: K workers follow the plan and record every operation.

Each worker owns one client (its own connections) and one history file. It
starts each planned op at its planned offset, or as soon as it is free if it
is late; the main phase ends at the planned duration and ops not yet started
are dropped. After an `info` the worker's process is retired (new process id,
see workloads.history) and, as in Jepsen, its client is closed and reopened:
the new process starts from fresh connections.

Every call is bounded by `op_timeout`; an answer that does not come in time is
`info`, never `fail`. An unexpected exception from a client is also `info`
(we cannot prove the call had no effect). Cancellation (Ctrl-C, a failing run)
closes the pending op as `info` before the worker stops, so the history keeps
the rule "every invoke has exactly one completion".
"""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Awaitable, Callable

from workloads.base import Completion, Workload, run_together
from workloads.generator import NS_PER_S, PlannedOp, worker_streams
from workloads.history import Clock, EventLog, WorkerHistory, worker_file

ClientFactory = Callable[[], Awaitable[Any]]


class Progress:
    """Counters for live progress: completions by type, ops in flight."""

    def __init__(self) -> None:
        self.completions: Counter[str] = Counter()
        self.in_flight = 0

    def on_event(self, ev: dict[str, Any]) -> None:
        if ev["type"] == "invoke":
            self.in_flight += 1
        else:
            self.in_flight -= 1
            self.completions[ev["type"]] += 1


class WorkloadRun:
    """One workload's execution: its workers, clients, histories and progress."""

    def __init__(self, workload: Workload, connect: ClientFactory, history_dir: Path,
                 clock: Clock, progress: Progress | None = None) -> None:
        self.workload = workload
        self.connect = connect
        self.concurrency = workload.options.concurrency
        self.clock = clock
        self.progress = progress or Progress()
        self._logs = [EventLog(worker_file(history_dir, w)) for w in range(self.concurrency)]
        self.histories = [WorkerHistory(log, w, self.concurrency, clock, self.progress.on_event)
                          for w, log in enumerate(self._logs)]
        self._clients: list[Any] = [None] * self.concurrency
        self.final_timed_out = False

    # -- clients ---------------------------------------------------------------------
    async def _client(self, worker: int) -> Any:
        if self._clients[worker] is None:
            self._clients[worker] = await self.connect()
        return self._clients[worker]

    async def _drop_client(self, worker: int) -> None:
        client, self._clients[worker] = self._clients[worker], None
        if client is not None:
            await _close_quietly(client)

    async def setup(self) -> None:
        """Run the workload's setup with worker 0's client (before faults start)."""
        await self.workload.setup(await self._client(0))

    # -- one operation -----------------------------------------------------------------
    async def run_op(self, worker: int, f: str, key: Any, value: Any) -> Completion:
        """Invoke, execute (bounded by op_timeout), complete; retire the process on info."""
        history = self.histories[worker]
        history.invoke(f, key, value)
        timeout = self.workload.options.op_timeout
        try:
            client = await asyncio.wait_for(self._client(worker), timeout)
            done = await asyncio.wait_for(
                self.workload.execute(client, worker, f, key, value), timeout)
        except asyncio.TimeoutError:
            done = Completion("info", value, error=f"timeout: no answer within {timeout:g}s")
        except asyncio.CancelledError:
            history.close_pending("cancelled: run interrupted or phase timed out")
            raise
        except Exception as exc:  # noqa: BLE001 - an unknown client error is indeterminate
            done = Completion("info", value, error=f"client error: {type(exc).__name__}: {exc}")
        history.complete(done.type, done.value, done.node, done.error)
        self.workload.observe(worker, f, key, value, done)
        if done.type == "info":
            await self._drop_client(worker)
        return done

    # -- phases --------------------------------------------------------------------------
    async def main_phase(self, plan: Iterable[PlannedOp], duration: float) -> None:
        """Follow the plan (drawn as it goes, see worker_streams) for `duration` seconds from now."""
        start = self.clock.now()
        end = start + int(duration * NS_PER_S)
        streams = worker_streams(plan, self.concurrency)
        await run_together(self._follow(w, stream, start, end) for w, stream in enumerate(streams))

    async def _follow(self, worker: int, stream: Iterator[PlannedOp], start: int, end: int) -> None:
        for op in stream:
            raise_if_cancelled()
            delay = start + op.at - self.clock.now()
            if delay > 0:
                await asyncio.sleep(delay / NS_PER_S)
            if self.clock.now() >= end:
                return
            f, key, value = self.workload.prepare(op)
            await self.run_op(worker, f, key, value)

    async def final_phase(self) -> None:
        """The workload's final phase (drain, final reads), then the durability audit
        (workloads.audit) with fresh clients; each bounded by drain_timeout."""
        try:
            await asyncio.wait_for(self.workload.final_phase(self.run_op),
                                   self.workload.options.drain_timeout)
        except asyncio.TimeoutError:
            self.final_timed_out = True
        audit = getattr(self.workload, "audit", None)
        if audit is None:
            return
        for worker in range(self.concurrency):
            await self._drop_client(worker)  # a fresh consumer: new connections and routes
        try:
            await asyncio.wait_for(audit(self.run_op), self.workload.options.drain_timeout)
        except asyncio.TimeoutError:
            self.final_timed_out = True

    async def close(self) -> None:
        """Close clients and files; a still-pending op (cancelled run) is closed as info."""
        for history in self.histories:
            history.close_pending("run ended before the operation completed")
        for worker in range(self.concurrency):
            await self._drop_client(worker)
        for log in self._logs:
            log.close()


def raise_if_cancelled() -> None:
    """Honour a cancellation that was swallowed: Python 3.11's asyncio.wait_for returns
    a result that arrived together with a cancellation and drops the cancellation, so a
    stopped run's worker would go on to the end of the phase."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _close_quietly(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is None:
        return
    try:
        result = close()
        if asyncio.iscoroutine(result):
            await asyncio.wait_for(result, 5)
    except Exception:  # noqa: BLE001 - closing a broken client must not fail the run
        pass
