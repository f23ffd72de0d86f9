"""The `chaos` command line: one click group, one module per command family.

Each command family lives in its own module under `harness/commands/` with a
`register(cli)` function; COMMANDS maps each command name to its module, so
adding a command never touches another's code. Modules are imported only when
one of their commands runs (or for `--help`): `chaos lin` need not load Fabric,
Paramiko and the deployer, about a second of start-up on a small machine.
"""
from __future__ import annotations

import faulthandler
import importlib
import signal
import sys

import click

COMMANDS = {
    "up": "harness.commands.cluster", "down": "harness.commands.cluster",
    "nodes": "harness.commands.cluster",
    "faults": "harness.commands.faults", "heal": "harness.commands.faults",
    "run": "harness.commands.run", "import": "harness.commands.run", "export": "harness.commands.run",
    "lin": "harness.commands.lin",
    "check": "harness.commands.check",
    "campaign": "harness.commands.campaign",
    "teeth": "harness.commands.teeth",
    "gc": "harness.commands.gc",
    "report": "harness.commands.report",
    "serve": "harness.commands.serve",
    "shrink": "harness.commands.shrink",
}


class LazyGroup(click.Group):
    """A group that imports a command's module the first time the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            importlib.import_module(COMMANDS[name]).register(self)
        return self.commands.get(name)


class UserError(click.ClickException):
    """An error caused by the user's input: printed as one line, exit code 3."""

    exit_code = 3


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rocketmq-chaos")
def cli() -> None:
    """Chaos-test a RocketMQ-style broker: deploy it, inject faults, check histories.

    Typical session: `chaos up` (local nodes), `chaos run --profile controller-3
    --fault random-kill`, open the report, `chaos down`.
    """


EXIT_ERROR = 3  # bad input or an error before a verdict; 0/1/2 are verdicts
EXIT_INTERRUPTED = 130


def main() -> None:
    """Entry point of the console script.

    Exit codes: 0 valid, 1 invalid, 2 unknown (as Jepsen), 3 bad input or an
    error that prevented a verdict, 130 interrupted. Errors print one line.
    `kill -USR1 <pid>` prints every thread's stack to stderr: what a stuck run waits for.
    """
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        result = cli.main(standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_ERROR)
    sys.exit(result if isinstance(result, int) else 0)
