"""Profiles are data: every one renders into configs that the processes accept."""
from __future__ import annotations

import pytest

from sut.config import ConfigError
from sut.process import load_factory
from sut.profiles import PROFILES, TIMINGS, Address, Peers, Profile, ProcessSpec, ProfileError, Timing, get, render


# The model's profiles; real RocketMQ's (rmq-*) render in sut.rocketmq.config (test_rocketmq_profiles.py).
@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("timing", sorted(TIMINGS))
def test_every_profile_renders_configs_its_processes_accept(name, timing):
    profile = get(name)
    n = profile.nodes_needed
    hosts = [f"10.0.0.{i + 1}" for i in range(n)]
    procs = render(profile, hosts, [f"/w/n{i}" for i in range(n)], timing)
    assert len({p.name for p in procs}) == len(procs)
    for proc in procs:
        assert proc.config["host"] == hosts[proc.node]
        assert proc.config["data_dir"] == f"/w/n{proc.node}/data/{proc.name}"
        load_factory(proc.role)(proc.config, f"{name}/{proc.name}")  # validates the whole config


def test_master_slave_profiles_point_brokers_at_the_nameserver_with_their_roles():
    procs = {p.name: p for p in render(get("master-slave-sync"), ["10.0.0.1", "10.0.0.2"], ["/a", "/b"])}
    master, slave = procs["broker-a-0"].config, procs["broker-a-1"].config
    assert master["namesrv_addrs"] == slave["namesrv_addrs"] == ["10.0.0.1:9876"]
    assert master["ha"]["broker_role"] == "SYNC_MASTER" and master["ha"]["in_sync_replicas"] == 2
    assert slave["ha"]["broker_role"] == "SLAVE" and slave["broker_id"] == 1
    assert master["ha"]["slave_timeout_ms"] == 3000
    fast = {p.name: p for p in render(get("master-slave-sync"), ["h", "h"], ["/a", "/b"], "fast")}
    assert fast["broker-a-0"].config["ha"]["slave_timeout_ms"] == 300
    assert get("master-slave-async").processes[1].config["ha"]["broker_role"] == "ASYNC_MASTER"


def test_markers_resolve_to_rendered_addresses_and_ports_can_be_moved():
    profile = Profile("p", "test", (
        ProcessSpec("a", "x", 0, {"port": 1, "raft_port": 2}),
        ProcessSpec("b", "x", 1, {"port": 3, "peer": Address("a", "raft_port"),
                                  "all": Peers("x"), "t": Timing("slave_timeout_ms")}),
    ))
    procs = {p.name: p for p in render(profile, ["h0", "h1"], ["/0", "/1"],
                                       ports=lambda name, key, port: port + 100)}
    b = procs["b"].config
    assert b["peer"] == "h0:102" and b["all"] == ["h0:101", "h1:103"] and b["t"] == 3000


def test_unknown_profiles_and_too_few_nodes_are_one_line_errors():
    with pytest.raises(ProfileError, match="unknown profile 'nope' \\(known: .*master-slave-sync"):
        get("nope")
    with pytest.raises(ProfileError, match="needs 2 nodes"):
        render(get("master-slave-sync"), ["h"], ["/w"])
    with pytest.raises(ProfileError, match="unknown timing scale"):
        render(get("single-broker"), ["h"], ["/w"], "slow")


def test_a_broker_config_with_a_bad_field_names_the_field():
    config = {"data_dir": "/tmp/x", "ha": {"broker_role": "MASTER"}}
    with pytest.raises(ConfigError, match="ha.broker_role: must be one of"):
        load_factory("broker")(config, "f.json")
    with pytest.raises(ConfigError, match="a SLAVE needs broker_id > 0"):
        load_factory("broker")({"data_dir": "/x", "ha": {"broker_role": "SLAVE"}}, "f.json")
    with pytest.raises(ConfigError, match="unknown ha_mode 'raft'"):
        load_factory("broker")({"data_dir": "/x", "ha_mode": "raft"}, "f.json")
