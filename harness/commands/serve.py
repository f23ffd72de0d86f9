"""`chaos serve`: browse a store's reports over HTTP (on 127.0.0.1 unless told otherwise)."""
from __future__ import annotations

from pathlib import Path

import click

from harness.cli import UserError
from harness.signals import stop_signals


def register(cli: click.Group) -> None:
    cli.add_command(serve)


@click.command("serve")
@click.argument("store", required=False, default=Path("store"), type=click.Path(path_type=Path))
@click.option("--port", "-p", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="TCP port (0: any free port).")
@click.option("--bind", "-b", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--verbose", "-v", is_flag=True, help="Log every request.")
def serve(store: Path, port: int, bind: str, verbose: bool) -> None:
    """Serve STORE [default: ./store] like Jepsen's `serve`: an index of campaigns,
    newest first, linking to every run's report. Only files under STORE are
    served. Ctrl-C (or SIGTERM) stops it.

    Example: chaos serve store --port 8080
    """
    from reports.serve import make_server
    if not store.is_dir():
        raise UserError(f"{store}: not a directory (a store is where `chaos run --store` writes)")
    try:
        server = make_server(store, bind, port, verbose)
    except OSError as exc:
        raise UserError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from None
    host, bound_port = server.server_address[:2]
    click.echo(f"serving {store} on http://{host}:{bound_port}/ (Ctrl-C to stop)", err=False)
    try:
        with stop_signals():
            server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.server_close()
