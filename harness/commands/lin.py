"""`chaos lin`: check history files for linearizability (EDN or ours)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from harness.cli import UserError


def register(cli: click.Group) -> None:
    cli.add_command(lin)


def _models() -> list[str]:
    from checkers.knossos import MODELS
    return list(MODELS)


@click.command("lin")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--model", default="cas-register", show_default=True,
              type=click.Choice(_models()), help="The sequential model the histories must follow.")
@click.option("--init", "init_text", default=None, metavar="VALUE",
              help="Initial state, as JSON or EDN: 0, '{\"x\": 0, \"y\": 0}', '{:x 0 :y 0}'. "
                   "Default: the model's (nil register, free mutex, empty collections).")
@click.option("--time-limit", default=60.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Seconds per file; past it the verdict is unknown.")
@click.option("--engine", default="jvm", show_default=True, type=click.Choice(["jvm", "knossos"]),
              help="jvm: our engine; knossos: a Knossos jar named by KNOSSOS_JAR (second opinion).")
@click.option("--nil-reads", default="auto", show_default=True,
              type=click.Choice(["auto", "absent", "unknown"]),
              help="What a read of null means: absent (saw an empty register, as our "
                   "workloads record it) or unknown (matches anything, as Knossos reads nil). "
                   "auto: unknown for .edn files, absent otherwise.")
@click.option("--json", "as_json", is_flag=True, help="Print each result as one JSON line.")
def lin(files: tuple[Path, ...], model: str, init_text: str | None, time_limit: float,
        engine: str, nil_reads: str, as_json: bool) -> None:
    """Check FILE... for linearizability and print a verdict per file.

    A FILE is a Jepsen EDN history (.edn), our history as JSON lines or a JSON
    array, or a run directory (its history/*.jsonl merged by time). Histories
    with a `key` field are checked per key. Exit code: 0 all valid, 1 some
    invalid, 2 some unknown (time limit, memory guard), 3 some file could not
    be read (after checking the others).

    Example: chaos lin data/cas-register/bad/*.edn --model cas-register --init 0
    """
    from checkers.knossos import HistoryError
    from checkers.knossos.jvm import EngineUnavailable

    init = _parse_init(init_text)
    try:
        results = _check_files(files, model, init, time_limit, engine, nil_reads)
    except (EngineUnavailable, ValueError) as err:
        raise UserError(str(err)) from None
    verdicts = []
    for path, result in zip(files, results):
        if isinstance(result, HistoryError):
            where = "" if str(result).startswith(str(path)) else f"{path}: "
            click.echo(f"error: {where}{result}", err=True)
            verdicts.append("error")
            continue
        verdicts.append(result["valid"])
        click.echo(json.dumps({"file": str(path), **result}, default=str) if as_json
                   else _line(path, result))
    if False in verdicts:
        raise SystemExit(1)
    if "error" in verdicts:
        raise SystemExit(UserError.exit_code)
    if "unknown" in verdicts:
        raise SystemExit(2)


def _check_files(files: tuple[Path, ...], model: str, init: Any, time_limit: float, engine: str,
                 nil_reads: str) -> list[Any]:
    """A verdict (or the HistoryError) per file. All files are read first and
    checked in one engine call per nil-read mode, so a batch of many small
    files pays the JVM round trip once and the histories run in parallel."""
    from checkers.knossos import HistoryError, analysis, load_history

    loaded: list[Any] = []
    for path in files:
        try:
            loaded.append(load_history(path))
        except HistoryError as err:
            loaded.append(err)
    results: list[Any] = list(loaded)
    modes = [nil_reads if nil_reads != "auto" else "unknown" if p.suffix == ".edn" else "absent"
             for p in files]
    for mode in sorted(set(modes)):
        todo = [i for i, m in enumerate(modes) if m == mode and not isinstance(loaded[i], Exception)]
        if engine == "knossos":
            checked = [_guarded(lambda i=i: analysis(model, loaded[i], time_limit=time_limit,
                                                      init=init, engine=engine, nil_reads=mode))
                       for i in todo]
        else:
            checked = _batch(model, [loaded[i] for i in todo], time_limit, init, mode)
        for i, result in zip(todo, checked):
            results[i] = result
    return results


def _batch(model: str, histories: list, time_limit: float, init: Any, nil_reads: str) -> list[Any]:
    """analyze_batch, or on a malformed history each one alone (so the error names its file)."""
    from checkers.knossos import HistoryError, analyze_batch
    try:
        return analyze_batch(model, histories, time_limit=time_limit, init=init,
                             nil_reads=nil_reads)
    except HistoryError:
        return [_guarded(lambda h=h: analyze_batch(model, [h], time_limit=time_limit, init=init,
                                                   nil_reads=nil_reads)[0])
                for h in histories]


def _guarded(check: Any) -> Any:
    from checkers.knossos import HistoryError
    try:
        return check()
    except HistoryError as err:
        return err


def _line(path: Path, result: dict) -> str:
    took = f"({result.get('time', 0):.3f} s)"
    where = "" if result.get("key") is None else f" key {result['key']}:"
    if result["valid"] is True:
        return f"{path}: valid {took}"
    if result["valid"] is False:
        previous = result.get("previous-ok")
        return (f"{path}: INVALID{where} cannot linearize {_op(result['op'])}"
                f"{'' if previous is None else ' after ' + _op(previous)} {took}")
    detail = result.get("detail") or ""
    return f"{path}: unknown{where} ({result.get('cause')}{': ' + detail if detail else ''}) {took}"


def _op(op: dict | None) -> str:
    if op is None:
        return "?"
    index = f"#{op['index']} " if "index" in op else ""
    return f"{index}{op.get('type')} {op.get('f')} {json.dumps(op.get('value'), default=str)} " \
           f"by process {op.get('process')}"


def _parse_init(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    import edn_format
    from checkers.knossos.edn import from_edn
    try:
        return from_edn(edn_format.loads(text))
    except Exception:
        raise UserError(f"--init {text!r} is neither JSON nor EDN") from None
