"""The `chaos` command line: one click group, one module per command family.

Each command family lives in its own module under `harness/commands/` and is
registered in COMMAND_MODULES, so adding a command never touches another's code.
"""
from __future__ import annotations

import importlib
import sys

import click

COMMAND_MODULES = [
    "harness.commands.cluster",
    "harness.commands.faults",
    "harness.commands.run",
    "harness.commands.lin",
    "harness.commands.check",
    "harness.commands.campaign",
    "harness.commands.gc",
    "harness.commands.report",
    "harness.commands.serve",
]


class UserError(click.ClickException):
    """An error caused by the user's input: printed as one line, exit code 3."""

    exit_code = 3


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rocketmq-chaos")
def cli() -> None:
    """Chaos-test a RocketMQ-style broker: deploy it, inject faults, check histories.

    Typical session: `chaos up` (local nodes), `chaos run --profile controller-3
    --fault random-kill`, open the report, `chaos down`.
    """


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(cli)


EXIT_ERROR = 3  # bad input or an error before a verdict; 0/1/2 are verdicts
EXIT_INTERRUPTED = 130


def main() -> None:
    """Entry point of the console script.

    Exit codes: 0 valid, 1 invalid, 2 unknown (as Jepsen), 3 bad input or an
    error that prevented a verdict, 130 interrupted. Errors print one line.
    """
    try:
        result = cli.main(standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_ERROR)
    sys.exit(result if isinstance(result, int) else 0)
