"""One shrink, end to end: the original run, the search, and what the store keeps of it.

The record lives in the original run's directory, under `shrink/`:
`shrink.json` (settings, progress and every attempt, rewritten after each
one), `original.yaml`, `minimal.yaml` (the best schedule so far, also after
a stop) and `index.html` (the two schedules side by side). The candidates'
runs are a campaign of their own (`<store>/<id>-shrink/runs/try-NNN`).
A later shrink of the same run first moves the earlier record aside to
`shrink-1/`, `shrink-2/`, ... (the highest number is the most recent), so a
second shrink that is stopped before its first trial loses nothing.
"""
from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness import schedule as schedule_file
from harness.shrink.original import OriginalRun, ShrinkRefused
from harness.shrink.search import Attempt, Outcome, Settings, Shrinker, TryResult, size
from harness.store import Store, write_json
from records import CampaignJson

RECORD_DIR = "shrink"
RECORD_FILE = "shrink.json"
PAGE = "index.html"


@dataclass(frozen=True)
class ShrinkResult:
    outcome: Outcome
    record_dir: Path
    command: str

    @property
    def page(self) -> Path:
        return self.record_dir / PAGE

    @property
    def minimal_file(self) -> Path:
        return self.record_dir / "minimal.yaml"


def lowered_fields(workload: str) -> tuple[str, ...]:
    """What the search lowers after the windows: clients, rate, then queues or keys."""
    return ("concurrency", "rate", "keys" if workload == "register" else "queues")


def choose_target(original: OriginalRun, anomaly: str | None) -> str:
    from harness.shrink.failure import default_target
    if anomaly is None:
        return default_target(original.classes) or ""
    if anomaly not in original.classes:
        raise ShrinkRefused(f"--anomaly {anomaly}: the run shows {', '.join(sorted(original.classes))}")
    return anomaly


def replay_command(minimal_file: Path, original: OriginalRun) -> str:
    if original.provision is not None:  # its nodes were a throwaway cluster: so are the replay's
        provider, nodes = original.provision
        where = ["--nodes", str(nodes)] + (["--provider", provider] if provider != "netns" else [])
    else:
        where = ["--inventory", str(original.inventory)]
    return shlex.join(["chaos", "run", "--schedule", str(minimal_file), *where, "--store", str(original.store)])


class Recorder:
    """Writes shrink.json and minimal.yaml after every attempt, the page at the end."""

    def __init__(self, original: OriginalRun, target: str, settings: Settings, campaign_id: str) -> None:
        self.original = original
        self.dir = original.run.path / RECORD_DIR
        set_aside(self.dir)
        self.dir.mkdir()
        self.head = {"kind": "shrink", "run": str(original.run.path), "target": target,
                     "classes": sorted(original.classes), "settings": vars(settings) | {"needed": settings.needed},
                     "campaign_id": campaign_id, "started_at": _now()}
        self.shrinker: Shrinker | None = None
        schedule_file.save(self.dir / "original.yaml", original.schedule)

    def attempt(self, attempt: Attempt) -> None:
        self.save("running")

    def save(self, status: str, outcome: Outcome | None = None, command: str | None = None) -> None:
        shrinker = self.shrinker
        best = shrinker.best if shrinker else self.original.schedule
        schedule_file.save(self.dir / "minimal.yaml", best)
        doc: dict[str, Any] = {**self.head, "status": status, "updated_at": _now(),
                               "runs": shrinker.runs if shrinker else 0,
                               "original_size": size(self.original.schedule), "minimal_size": size(best),
                               "attempts": [_attempt_json(a) for a in (shrinker.attempts if shrinker else [])]}
        if outcome is not None:
            doc.update({"seconds": outcome.seconds, "reproduction": {
                "tries": outcome.minimal_tries, "failed": outcome.minimal_failed,
                "rate": round(outcome.reproduction_rate, 3)}, "command": command})
        write_json(self.dir / RECORD_FILE, doc)


def set_aside(record_dir: Path) -> Path | None:
    """Move an earlier record to the next free `shrink-N` beside it; where it went."""
    if not record_dir.exists() and not record_dir.is_symlink():
        return None
    numbers = [int(p.name.rpartition("-")[2]) for p in record_dir.parent.glob(f"{RECORD_DIR}-*")
               if p.name.rpartition("-")[2].isdigit()]
    aside = record_dir.with_name(f"{RECORD_DIR}-{max(numbers, default=0) + 1}")
    record_dir.rename(aside)
    return aside


def _attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {"index": attempt.index, "step": attempt.step, "failing": attempt.failing, "note": attempt.note,
            "size": size(attempt.schedule), "tries": attempt.tries,
            "windows": [w.model_dump(mode="json") for w in attempt.schedule.windows],
            "shape": attempt.schedule.shape.model_dump(mode="json")}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def shrink(original: OriginalRun, settings: Settings, console: Any, anomaly: str | None = None,
           trial: Callable[[schedule_file.Schedule], TryResult] | None = None,
           log: Callable[[str], None] = lambda line: None) -> ShrinkResult:
    """Search for the minimal schedule; on a stop signal, keep and return what was found
    (status `interrupted`)."""
    target = choose_target(original, anomaly)
    store = Store(original.store)
    campaign_id = store.new_campaign("-shrink")
    write_json(store.campaign_dir(campaign_id) / "campaign.json",
               CampaignJson(campaign_id=campaign_id, kind="shrink", of=str(original.run.path)).as_json())
    recorder = Recorder(original, target, settings, campaign_id)
    if trial is None:
        from harness.shrink.trials import LifecycleTrials
        trial = LifecycleTrials(original.base_values(), campaign_id, console, log)

    def on_attempt(attempt: Attempt) -> None:
        recorder.attempt(attempt)
        if attempt.index and attempt.failing is not None:
            verdict = attempt.note or ("fails" if attempt.failing else "passes")
            sized = size(attempt.schedule)
            log(f"attempt {attempt.index} ({attempt.step}): {verdict} "
                f"({attempt.failed_tries}/{len(attempt.tries)} tries with {target}); "
                f"{sized['windows']} windows, {sized['fault_seconds']:g}s of faults, {sized['seconds']:g}s, "
                f"concurrency {sized['concurrency']}")

    shrinker = Shrinker(original.schedule, trial, target, settings, on_attempt=on_attempt,
                        lowered=lowered_fields(original.schedule.workload))
    recorder.shrinker = shrinker
    shrinker.record_original(original.classes, str(original.run.path))
    try:
        outcome = shrinker.run()
    except KeyboardInterrupt:
        outcome = shrinker.outcome("interrupted")
    command = replay_command(recorder.dir / "minimal.yaml", original)
    recorder.save(outcome.status, outcome, command)
    result = ShrinkResult(outcome, recorder.dir, command)
    render_page(result.record_dir)
    return result


def render_page(record_dir: Path) -> Path | None:
    """The reproducer page, if the reports package is there (it renders from the record),
    and the run's report again, which then links it."""
    try:
        import reports
        from reports.shrink import render
    except ImportError:
        return None
    page = render(record_dir)
    if (record_dir.parent / "report" / "index.html").is_file():
        try:
            reports.render_run(record_dir.parent)
        except Exception:  # noqa: BLE001 - the reproducer page stands without the link
            pass
    return page
