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
]


class UserError(click.ClickException):
    """An error caused by the user's input: printed as one line, exit code 2."""

    exit_code = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rocketmq-chaos")
def cli() -> None:
    """Chaos-test a RocketMQ-style broker: deploy it, inject faults, check histories.

    Typical session: `chaos up` (local nodes), `chaos run --profile controller-3
    --fault random-kill`, open the report, `chaos down`.
    """


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(cli)


def main() -> None:
    """Entry point of the console script."""
    sys.exit(cli(standalone_mode=True))
