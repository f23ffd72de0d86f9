"""`chaos up`, `chaos down`, `chaos nodes`: the local cluster and node status."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from harness.cli import UserError
from harness.signals import stop_signals
from harness.stale import clean_up_first
from inventory import Inventory, InventoryError, Pool, docker, docker_image, load, netns

PROVIDERS = {"netns": netns, "docker": docker}
_provider_option = click.option(
    "--provider", type=click.Choice(sorted(PROVIDERS)), default="netns", show_default=True,
    help="netns: network namespaces on this host; docker: containers of a locally built image.")


def register(cli: click.Group) -> None:
    cli.add_command(up)
    cli.add_command(down)
    cli.add_command(nodes)


@click.command()
@click.option("--nodes", "-n", "size", type=int, default=netns.DEFAULT_NODES, show_default=True,
              help=f"Number of nodes ({netns.MIN_NODES} to {netns.MAX_NODES}).")
@click.option("--name", default=netns.DEFAULT_NAME, show_default=True,
              help="Cluster name; clusters with different names coexist.")
@_provider_option
@click.option("--image", default=docker_image.DEBOOTSTRAP, show_default=True,
              help="docker: where the node image comes from: 'debootstrap' (a Debian root file system "
                   "built here) or a local Debian-based image to build on.")
@click.option("--subnet", help="docker: the 10.214.X.0/24 network of the nodes [default: a free one].")
def up(size: int, name: str, provider: str, image: str, subnet: str | None) -> None:
    """Create a local cluster of namespace nodes (needs root) or of containers.

    netns: one network namespace per node, each with its own IP, iptables and
    sshd, joined by a bridge. docker: one container per node on a bridge
    network with a fixed IP, NET_ADMIN and sshd (docs/docker.md).

    Prints the path of the inventory file it wrote (use it with --inventory).
    An existing cluster of the same name is replaced.
    """
    console = Console(stderr=True)
    started = time.monotonic()
    if provider != "docker":
        _refuse_docker_options(image, subnet)
    try:
        PROVIDERS[provider].check_can_provision(name, size)
        with stop_signals():  # SIGTERM/SIGHUP: up removes what it made, as on Ctrl-C
            clean_up_first(console)
            with console.status(f"creating cluster {name} with {size} nodes") as status:
                def progress(node: str) -> None:
                    status.update(f"creating cluster {name}: node {node} of {size} is up, waiting for the rest")

                if provider == "docker":
                    inventory = docker.up(name, size, image=image, subnet=subnet, on_node=progress,
                                          on_step=status.update)
                else:
                    inventory = netns.up(name, size, on_node=progress)
    except InventoryError as error:
        raise UserError(str(error)) from None
    except OSError as error:  # e.g. CHAOS_HOME not writable
        raise UserError(f"cannot create cluster {name}: {error}") from None
    first, last = inventory.nodes[0].host, inventory.nodes[-1].host
    console.print(f"cluster {name}: {size} nodes ({first} .. {last}) up in {time.monotonic() - started:.1f} s")
    click.echo(str(inventory.source))


@click.command()
@click.option("--name", default=netns.DEFAULT_NAME, show_default=True, help="Cluster to remove.")
@click.option("--all", "everything", is_flag=True, help="Remove every local cluster (netns only).")
@_provider_option
@click.option("--image", "images", is_flag=True, help="docker: also remove the node images built here.")
def down(name: str, everything: bool, provider: str, images: bool) -> None:
    """Remove a local cluster and any stale ones (netns needs root).

    Removes every process in the cluster's namespaces (sshd, SUT), the
    namespaces, bridge and veths, its keys and its state directory.

    Also removes clusters left behind by crashed runs (a creation that never
    finished, a test cluster whose test process is gone, namespaces without a
    state directory). A cluster of the other provider is left alone: down
    names it and the command that removes it.
    """
    if provider == "docker":
        _down_docker(name, everything, images)
        return
    if images:
        raise UserError("--image goes with --provider docker")
    try:
        if everything:
            removed = netns.down_all()
        else:
            removed = [f"cluster {name}: removed"] if netns.down(name) else []
            removed += netns.down_stale()
    except InventoryError as error:
        raise UserError(str(error)) from None
    except OSError as error:
        raise UserError(f"cannot remove local clusters: {error}") from None
    _say_removed("netns", removed, everything, name)


def _down_docker(name: str, everything: bool, images: bool) -> None:
    if everything:
        raise UserError("--all is for the netns provider; remove docker clusters by --name")
    try:
        removed = [f"docker cluster {name}: removed"] if docker.down(name) else []
        removed += docker.down_stale()
        if images:
            removed += docker_image.remove_images(docker.engine())
    except InventoryError as error:
        raise UserError(str(error)) from None
    except OSError as error:
        raise UserError(f"cannot remove docker clusters: {error}") from None
    _say_removed("docker", removed, False, name)


def _refuse_docker_options(image: str, subnet: str | None) -> None:
    if image != docker_image.DEBOOTSTRAP or subnet is not None:
        raise UserError("--image and --subnet go with --provider docker")


def _say_removed(provider: str, removed: list[str], everything: bool, name: str) -> None:
    for line in removed:
        click.echo(line)
    if not removed:
        click.echo("nothing to remove" if everything else f"nothing to remove (no {provider} cluster named {name})")
    for hint in clusters_elsewhere(provider, name, everything):
        click.echo(hint)


def clusters_elsewhere(provider: str, name: str, everything: bool) -> list[str]:
    """What `chaos down --provider PROVIDER` leaves to the other provider: its cluster
    `name` (or, with --all, all its clusters), as commands that remove them."""
    hints = []
    for other, module in PROVIDERS.items():
        if other == provider:
            continue
        for record in module.clusters():
            if everything or record.name == name:
                hints.append(f"{other} cluster {record.name} remains (remove it with: "
                             f"chaos down --provider {other} --name {record.name})")
    return hints


@click.command()
@click.option("--inventory", "-i", "inventory_file", type=click.Path(path_type=Path),
              help="Inventory YAML file (any kind: netns, docker, ssh).")
@click.option("--name", help=f"Local cluster name (default: {netns.DEFAULT_NAME}).")
@_provider_option
def nodes(inventory_file: Path | None, name: str | None, provider: str) -> None:
    """Show the nodes and whether each answers over SSH.

    A table of node, address, roles, reachable and kernel uptime (local
    nodes share the host's kernel, so they show the host's uptime).

    Exits non-zero if a node is unreachable.
    """
    inventory = _inventory(inventory_file, name, PROVIDERS[provider])
    with Pool(inventory, connect_timeout=5) as pool:
        probes = _probe(pool, inventory)
    table = Table(title=f"{inventory.name} ({inventory.kind}, {len(inventory.nodes)} nodes)")
    for column in ("node", "address", "roles", "reachable", "uptime"):
        table.add_column(column)
    for node in inventory.nodes:
        uptime, error = probes[node.name]
        address = node.host if node.port == 22 else f"{node.host}:{node.port}"
        reachable = "[green]yes[/]" if error is None else "[red]no[/]"
        table.add_row(node.name, address, ",".join(node.roles) or "-", reachable, uptime or "-")
    Console().print(table)
    failed = {n: e for n, (_, e) in probes.items() if e is not None}
    if failed:
        first = next(iter(failed.values()))
        raise UserError(f"{len(failed)} of {len(probes)} nodes unreachable; first: {first}")


def _inventory(inventory_file: Path | None, name: str | None, provider=netns) -> Inventory:
    if inventory_file is not None and name is not None:
        raise UserError("give either --inventory or --name, not both")
    try:
        if inventory_file is None:
            name = name or provider.DEFAULT_NAME
            inventory_file = provider.inventory_path(name)
            if not inventory_file.exists():
                option = "" if provider is netns else " --provider docker"
                raise UserError(f"no local cluster named {name}: create it with `chaos up{option} --name {name}` "
                                "or pass --inventory FILE")
        return load(inventory_file)
    except InventoryError as error:
        raise UserError(str(error)) from None


def _probe(pool: Pool, inventory: Inventory) -> dict[str, tuple[str | None, InventoryError | None]]:
    """Uptime of every node over SSH, or the error that prevented it."""
    def probe(node: str) -> tuple[str | None, InventoryError | None]:
        try:
            seconds = float(pool.run(node, ["cat", "/proc/uptime"], timeout=10).stdout.split()[0])
        except InventoryError as error:
            return None, error
        return _duration(seconds), None

    with ThreadPoolExecutor(max_workers=len(inventory.nodes)) as executor:
        return dict(zip(inventory.names, executor.map(probe, inventory.names)))


def _duration(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h {minutes:02d}m" if days else f"{hours}h {minutes:02d}m"
