"""The docker provider: containers as nodes on a real Docker engine.

Unit-level logic (subnets, image tags, error lines) runs everywhere; the
rest needs a Docker engine (`CHAOS_DOCKER=1 bash scripts/setup.sh` starts
one) and fails in CI without it. Every cluster has a unique name and lives in
a CHAOS_HOME of its own, and the module checks at the end that no container
or network of those homes is left.
"""
from __future__ import annotations

import io
import ipaddress
import os
import signal
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

import nuclei
from conftest import require, unique_cluster_name
from nuclei.net import chain_rules
from nuclei.process import inspect
from support.docker import CHAOS, chaos, engine_or_skip, leftovers
from support.faults import PORT, make_context, proc_state, start_servers, stop_servers, views_measured
from harness.spec import SpecError, build_spec
from inventory import Pool, ProvisionError, docker, docker_image
from faults import grudge as shapes

# Most of the module drives the engine; the whole module runs in the suite's serial pass.
pytestmark = pytest.mark.docker


# -- logic without an engine ------------------------------------------------------------


def test_subnets_overlapping_a_host_network_count_as_in_use_in_the_provider_range():
    networks = [ipaddress.IPv4Network("10.214.8.0/22"), ipaddress.IPv4Network("10.213.0.0/16")]
    assert docker.subnets_in_use(networks, docker.NETWORK_PREFIX) == {8, 9, 10, 11}


def test_a_subnet_outside_the_provider_range_is_refused_with_the_range():
    with pytest.raises(ProvisionError, match=r"give a 10\.214\.X\.0/24 network"):
        docker._parse_subnet("192.168.1.0/24")
    with pytest.raises(ProvisionError, match="--subnet 'nonsense'"):
        docker._parse_subnet("nonsense")
    assert docker._parse_subnet("10.214.77.0/24") == 77


def test_the_image_tag_changes_with_its_source_and_not_otherwise():
    assert docker_image.image_tag(docker_image.DEBOOTSTRAP) == docker_image.image_tag(docker_image.DEBOOTSTRAP)
    assert docker_image.image_tag(docker_image.DEBOOTSTRAP) != docker_image.image_tag("debian:bookworm")
    assert docker_image.image_tag("x").startswith(f"{docker_image.IMAGE_REPOSITORY}:")


def test_a_socket_without_permission_is_told_apart_from_a_missing_engine():
    denied = docker._engine_problem(_chained(PermissionError(13, "denied")))
    assert "no permission" in denied and "docker group" in denied
    missing = docker._engine_problem(_chained(FileNotFoundError(2, "no such file")))
    assert "no Docker engine answers" in missing and docker.SETUP_HINT in missing


def _chained(cause: Exception) -> Exception:
    try:
        try:
            raise cause
        except Exception as inner:
            raise RuntimeError("Error while fetching server API version") from inner
    except RuntimeError as outer:
        return outer


def test_mounts_a_stopped_debootstrap_left_in_its_target_are_unmounted(tmp_path):
    require(os.geteuid() == 0, "needs root: mounts a tmpfs")
    inner = tmp_path / "rootfs" / "proc"
    inner.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "none", str(inner)], check=True)
    try:
        docker_image.unmount_below(tmp_path / "rootfs")
        assert str(inner) not in Path("/proc/mounts").read_text()
    finally:
        subprocess.run(["umount", "-l", str(inner)], capture_output=True)


def test_up_without_an_engine_says_how_to_start_one_and_leaves_nothing(tmp_path):
    missing = f"unix://{tmp_path}/no-docker.sock"
    result = chaos("up", "--provider", "docker", "--name", unique_cluster_name("d"), "-n", "3",
                   home=tmp_path / "home", DOCKER_HOST=missing)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine answers" in lines[0] and "CHAOS_DOCKER=1" in lines[0]
    assert not (tmp_path / "home" / "docker").exists() or not any((tmp_path / "home" / "docker").iterdir())


def test_a_run_refuses_the_docker_provider_together_with_an_inventory(tmp_path):
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("nodes: [{name: n1, host: 192.0.2.1}]\n")
    with pytest.raises(SpecError, match="--provider docker .* or --inventory, not both"):
        build_spec({"provider": "docker", "inventory": inventory}, check_store=False)
    with pytest.raises(SpecError, match="--provider"):
        build_spec({"provider": "podman"}, check_store=False)
    assert build_spec({"provider": "docker"}, check_store=False).provider == "docker"


def test_docker_options_are_refused_for_the_netns_provider(tmp_path):
    result = chaos("up", "--image", "debian:bookworm", "--name", unique_cluster_name("d"), home=tmp_path)
    assert result.returncode == 3 and "--provider docker" in result.stderr
    result = chaos("down", "--image", "--name", unique_cluster_name("d"), home=tmp_path)
    assert result.returncode == 3 and "--provider docker" in result.stderr


# -- on a real engine -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A CHAOS_HOME for this module; at the end nothing labelled with it may remain."""
    path = tmp_path_factory.mktemp("chaos-home")
    yield path
    try:
        client = docker.engine()
    except ProvisionError:
        return
    left = leftovers(client, path)
    for record in docker.clusters(home=path):
        docker.down(record.name, home=path)
    assert not left, f"left behind: {left}"


@pytest.fixture(scope="module")
def cluster(home):
    """Three containers, shared by the tests that only look at them."""
    client = engine_or_skip()
    name = unique_cluster_name("d")
    inventory = docker.up(name, 3, home=home, persistent=False)
    try:
        with Pool(inventory) as pool:
            yield client, inventory, pool
    finally:
        docker.down(name, home=home)


def test_nodes_are_containers_with_fixed_addresses_net_admin_and_no_privileges(cluster):
    client, inventory, pool = cluster
    assert inventory.kind == "docker" and inventory.source.is_file()
    for index, node in enumerate(inventory.nodes, start=1):
        container = client.containers.get(f"rmqc-{inventory.name}-{node.name}")
        host_config = container.attrs["HostConfig"]
        assert host_config["Privileged"] is False
        assert host_config["CapAdd"] == ["CAP_NET_ADMIN"] or host_config["CapAdd"] == ["NET_ADMIN"]
        labels = container.labels
        assert labels[docker.LABEL_CLUSTER] == inventory.name and labels[docker.LABEL_ROLE] == "node"
        networks = container.attrs["NetworkSettings"]["Networks"]
        assert networks[f"rmqc-{inventory.name}"]["IPAddress"] == node.host
        assert node.host.startswith(docker.NETWORK_PREFIX + ".") and node.host.endswith(f".{10 + index}")
        assert pool.run(node.name, ["hostname"]).stdout.strip() == node.name


def test_chaos_nodes_finds_a_docker_cluster_by_name_and_reaches_every_container(cluster, home):
    _, inventory, _ = cluster
    result = chaos("nodes", "--provider", "docker", "--name", inventory.name, home=home)
    assert result.returncode == 0, result.stderr
    assert "(docker, 3 nodes)" in result.stdout and result.stdout.count("yes") == 3


def test_a_second_up_reuses_the_cached_image(cluster):
    client, _, _ = cluster
    tag = docker_image.image_tag(docker_image.DEBOOTSTRAP)
    created = client.images.get(tag).attrs["Created"]
    assert docker_image.build_image(client) == tag
    assert client.images.get(tag).attrs["Created"] == created


def test_a_subnet_already_in_use_is_refused_and_leaves_nothing(cluster, home, tmp_path):
    client, inventory, _ = cluster
    taken = str(ipaddress.IPv4Network(f"{inventory.nodes[0].host}/24", strict=False))
    name = unique_cluster_name("d")
    result = chaos("up", "--provider", "docker", "--name", name, "-n", "3", "--subnet", taken, home=home)
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0 and f"subnet {taken} is already in use" in result.stderr
    assert not (home / "docker" / name).exists()
    assert not docker.owned(client, home, name)["containers"] + docker.owned(client, home, name)["networks"]


def test_an_image_build_that_fails_names_the_step_and_leaves_nothing(cluster, home):
    client, _, _ = cluster
    broken = _image_without_a_shell(client)
    name = unique_cluster_name("d")
    try:
        result = chaos("up", "--provider", "docker", "--name", name, "-n", "3", "--image", broken, home=home)
    finally:
        client.images.remove(broken, force=True)
    assert result.returncode == 3
    line = result.stderr.strip()
    assert "\n" not in line and f"building the node image on {broken} failed" in line
    assert not (home / "docker" / name).exists()
    assert not any(docker.owned(client, home, name).values())
    from docker.errors import ImageNotFound
    with pytest.raises(ImageNotFound):
        client.images.get(docker_image.image_tag(broken))


def _image_without_a_shell(client) -> str:
    """A one-file image: `RUN` cannot work in it, so building on it must fail."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        content = b"no shell here\n"
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    tag = f"rocketmq-chaos-test-broken:{unique_cluster_name('b').lower()}"
    repository, version = tag.split(":")
    client.api.import_image_from_data(data.getvalue(), repository=repository, tag=version)
    return tag


def test_an_image_missing_from_the_engine_is_refused_without_pulling(tmp_path):
    engine_or_skip()
    result = chaos("up", "--provider", "docker", "--name", unique_cluster_name("d"), "-n", "3",
                   "--image", "rocketmq-chaos-test/not-here:1", home=tmp_path)
    assert result.returncode == 3 and "is not in the local Docker engine" in result.stderr


# -- every fault family inside containers ------------------------------------------------------


@pytest.fixture(scope="module")
def servers(cluster):
    """One small TCP server per container, as kill/suspend targets and partition probes."""
    _, inventory, pool = cluster
    procs = start_servers(inventory, pool)
    try:
        yield procs
    finally:
        stop_servers(pool, procs)


@pytest.fixture
def ctx(cluster, servers, tmp_path):
    _, inventory, pool = cluster
    context = make_context(inventory, pool, tmp_path, servers, leader="n2")
    yield context
    assert nuclei.heal(pool, context.journal).ok


def test_a_kill_in_a_container_kills_the_target_and_stop_restarts_it_without_zombies(cluster, servers, ctx):
    _, _, pool = cluster
    nemesis = create("fixed-kill", targets=["n1"])
    old_pid = inspect(pool, servers["n1"])[0].pid
    handle = nemesis.start(ctx)
    assert proc_state(pool, servers["n1"]) is None and proc_state(pool, servers["n2"]) in ("S", "R")
    zombies = pool.run("n1", "ps -eo stat= | grep -c '^Z' || true").stdout.strip()
    assert zombies == "0"  # sshd, as process 1 of the container, reaps the killed server
    nemesis.stop(ctx, handle)
    restarted = inspect(pool, servers["n1"])
    assert restarted[0].pid != old_pid and restarted[0].state in ("S", "R")


def test_a_suspend_in_a_container_stops_the_target_and_stop_resumes_it(cluster, servers, ctx):
    _, _, pool = cluster
    nemesis = create("leader-suspend")
    handle = nemesis.start(ctx)
    assert handle.targets == ["n2"] and proc_state(pool, servers["n2"]) == "T"
    nemesis.stop(ctx, handle)
    assert proc_state(pool, servers["n2"]) in ("S", "R")


def test_a_partition_between_containers_cuts_exactly_the_grudge_and_heals(cluster, servers, ctx):
    _, inventory, pool = cluster
    nemesis = create("random-partition")
    handle = nemesis.start(ctx)
    expected = shapes.views({k: set(v) for k, v in handle.grudge.items()}, ctx.names)
    assert views_measured(inventory, pool) == expected
    nemesis.stop(ctx, handle)
    assert all(view == set(ctx.names) for view in views_measured(inventory, pool).values())


def test_a_leader_partition_isolates_the_leader_container_but_the_control_node_still_reaches_it(cluster, ctx):
    _, inventory, pool = cluster
    nemesis = create("leader-partition")
    handle = nemesis.start(ctx)
    try:
        assert handle.targets == ["n2"]
        assert views_measured(inventory, pool)["n2"] == {"n2"}
        leader = inventory.node("n2").host
        socket.create_connection((leader, PORT), timeout=5).close()  # from the control node
    finally:
        nemesis.stop(ctx, handle)
    assert views_measured(inventory, pool)["n2"] == set(ctx.names)


def test_random_loss_in_containers_puts_statistic_rules_in_each_own_chain(cluster, ctx):
    _, _, pool = cluster
    nemesis = create("random-loss", probability=0.35)
    handle = nemesis.start(ctx)
    for node in ctx.names:
        rules = chain_rules(pool, node)
        assert len(rules) == 2 * len(handle.details["loss"].get(node, []))
        assert all("--probability 0.35" in rule for rule in rules)
    nemesis.stop(ctx, handle)
    assert all(chain_rules(pool, node) == [] for node in ctx.names)


def test_sigterm_while_up_is_creating_containers_removes_everything_it_created(cluster, home):
    client, _, _ = cluster
    name = unique_cluster_name("d")
    proc = subprocess.Popen([CHAOS, "up", "--provider", "docker", "--name", name, "-n", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CHAOS_HOME": str(home)})
    try:
        deadline = time.monotonic() + 120
        while not docker.owned(client, home, name)["containers"]:
            assert proc.poll() is None and time.monotonic() < deadline, "no container was created"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert not any(docker.owned(client, home, name).values())
    assert not (home / "docker" / name).exists()


def test_a_cluster_can_be_built_on_a_local_base_image_without_any_download(cluster, home):
    """--image IMAGE: a Dockerfile on top of an image the user has; ours already has every
    package, so apt never runs (no network) and the derived image starts working nodes."""
    client, _, _ = cluster
    base = docker_image.image_tag(docker_image.DEBOOTSTRAP)
    derived = docker_image.build_image(client, base)
    name = unique_cluster_name("d")
    try:
        assert derived != base and client.images.get(derived).labels[docker.LABEL_ROLE] == "image"
        inventory = docker.up(name, 3, home=home, persistent=False, image=base)
        with Pool(inventory) as pool:
            assert pool.run("n3", ["python3", "-c", "print('ok')"]).stdout.strip() == "ok"
    finally:
        docker.down(name, home=home)
        client.images.remove(derived, force=True)


def test_down_of_one_provider_names_the_other_providers_cluster_of_that_name(tmp_path, monkeypatch):
    """`chaos down --name lab` (netns) leaves a docker cluster lab alone: it says so and how
    to remove it; with --all, every docker cluster. Unit level: state files only."""
    from harness.commands.cluster import clusters_elsewhere
    from inventory import netns

    monkeypatch.setenv("CHAOS_HOME", str(tmp_path))
    for name, subnet in (("lab", 3), ("ci", 4)):
        record = docker.DockerRecord(name=name, subnet=subnet, size=3, owner_pid=1, owner_start=0,
                                     persistent=True, status="ready", image="chaos-node:test")
        state = tmp_path / "docker" / name
        state.mkdir(parents=True)
        (state / "cluster.json").write_text(record.model_dump_json())
    assert clusters_elsewhere("netns", "lab", False) == [
        "docker cluster lab remains (remove it with: chaos down --provider docker --name lab)"]
    assert clusters_elsewhere("netns", "chaos", False) == []
    assert len(clusters_elsewhere("netns", "chaos", True)) == 2
    assert clusters_elsewhere("docker", "lab", False) == []  # no namespace cluster lab here
    assert netns.clusters() == []
from faults.registry import create
