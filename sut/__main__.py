"""`python -m sut <role> --config FILE` starts a SUT process; `stop <role>` ends one."""
from __future__ import annotations

import argparse
import sys

from sut.process import ROLES, run, stop_process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sut", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for role in ROLES:
        p = sub.add_parser(role, help=f"run a {role} process")
        p.add_argument("--config", required=True, help="JSON config file")
    stop = sub.add_parser("stop", help="SIGTERM a process by its pidfile, SIGKILL if it lingers")
    stop.add_argument("role", choices=sorted(ROLES))
    stop.add_argument("--config", required=True, help="the config file it was started with")
    stop.add_argument("--timeout", type=float, default=10.0, help="seconds before SIGKILL")
    args = parser.parse_args(argv)
    if args.command == "stop":
        return stop_process(args.role, args.config, args.timeout)
    return run(args.command, args.config)


if __name__ == "__main__":
    sys.exit(main())
