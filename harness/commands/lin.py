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
    from checkers.knossos import HistoryError, analysis, load_history
    from checkers.knossos.jvm import EngineUnavailable

    init = _parse_init(init_text)
    verdicts = []
    for path in files:
        try:
            nil = nil_reads if nil_reads != "auto" else \
                "unknown" if path.suffix == ".edn" else "absent"
            result = analysis(model, load_history(path), time_limit=time_limit, init=init,
                              engine=engine, nil_reads=nil)
        except HistoryError as err:
            click.echo(f"error: {err}", err=True)
            verdicts.append("error")
            continue
        except (EngineUnavailable, ValueError) as err:
            raise UserError(str(err)) from None
        verdicts.append(result["valid"])
        click.echo(json.dumps({"file": str(path), **result}, default=str) if as_json
                   else _line(path, result))
    if False in verdicts:
        raise SystemExit(1)
    if "error" in verdicts:
        raise SystemExit(UserError.exit_code)
    if "unknown" in verdicts:
        raise SystemExit(2)


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
