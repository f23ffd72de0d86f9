"""The rmq-* profiles as data: rendering into RocketMQ configs and JVM argv, and what a
run refuses on them before anything starts (no cluster, no JVM)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli
from harness.spec import SpecError, build_spec
from faults.crash import crash_fs_unavailable
from sut.systems import failure_detection_s, refused_fault
from sut.systems import profile as get
from sut.systems import profiles
from tests.conftest import require
from sut.rocketmq.config import ADD_OPENS, render
from sut.rocketmq.deploy import live_sync_state_members

REPO = Path(__file__).resolve().parents[1]
HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
WORKDIRS = [f"/var/lib/chaos/nodes/n{i}" for i in range(1, 5)]


def rendered(name: str, timing: str = "fast"):
    return {p.name: p for p in render(get(name), HOSTS, WORKDIRS, "rocketmq-5.3.3-abc", timing)}


def test_the_four_modes_and_the_article_options_are_profiles_of_the_rocketmq_system():
    for name in ("rmq-dledger-3", "rmq-controller-3", "rmq-controller-unclean", "rmq-master-slave-sync",
                 "rmq-controller-3-jraft-tsp-slaveread", "rmq-dledger-3-tsp-slaveread"):
        assert profiles()[name].system == "rocketmq"
    assert get("rmq-controller-unclean").expected_safe is False
    assert set(get("rmq-controller-unclean").unsafe_under) >= {"kill", "partition"}
    assert all(profiles()[n].expected_safe for n in ("rmq-dledger-3", "rmq-controller-3", "rmq-master-slave-sync"))


def test_what_each_profile_promises_under_a_machine_crash():
    # ASYNC_FLUSH everywhere: the replicated safe profiles promise to survive a crash of a
    # minority of the broker group and refuse a majority crash; the baseline without
    # failover refuses every crash; the unclean profile is expected to lose.
    for name in ("rmq-dledger-3", "rmq-controller-3", "rmq-controller-3-jraft-tsp-slaveread"):
        assert profiles()[name].expected_safe and "crash" not in profiles()[name].unsafe_under
        assert "by design" in refused_fault(name, "major-crash")
        assert refused_fault(name, "leader-crash") is None and refused_fault(name, "minor-crash") is None
    assert "crash" in get("rmq-controller-unclean").unsafe_under
    assert refused_fault("rmq-controller-unclean", "major-crash") is None
    assert "no failover" in refused_fault("rmq-master-slave-sync", "random-crash")
    # One broker that flushes before it acknowledges promises to survive any crash.
    assert get("rmq-single-sync").expected_safe and "crash" not in get("rmq-single-sync").unsafe_under
    assert all(refused_fault("rmq-single-sync", f) is None for f in ("leader-crash", "major-crash"))


def test_the_single_broker_flushes_before_it_acknowledges_and_waits_for_no_slave():
    [broker] = [p for p in rendered("rmq-single-sync").values() if p.role == "broker"]
    assert broker.properties["flushDiskType"] == "SYNC_FLUSH"
    assert broker.properties["brokerRole"] == "ASYNC_MASTER" and broker.properties["brokerId"] == "0"
    assert rendered("rmq-master-slave-sync")["broker-a-0"].properties["flushDiskType"] == "ASYNC_FLUSH"


def test_the_crash_instant_recognises_rocketmqs_commitlog_and_dledger_entry_files(tmp_path):
    import os
    from faults.crash import unsynced_log_bytes
    from nuclei.lazyfs_node import CrashState
    state = CrashState(str(tmp_path / "state"))
    files = {"broker-a-0/store/commitlog": 11, "broker-a-1/store/dledger-n1/data": 7,
             "controller-0/controller-store/dledger-n0/data": 3, "broker-a-1/store/dledger-n1/index": 5,
             "broker-a-0/store/consumequeue/chaos/0": 2, "broker-a-0/store/data": 1}
    for directory, size in files.items():
        os.makedirs(state.path(directory))
        live = os.path.join(state.path(directory), "00000000000000000000")
        fd = os.open(live, os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, b"x" * size, 0)
        state.wrote(state.fid(live, new=True), 0, size)
        os.close(fd)
    status = state.status()
    assert status["unsynced_by_dir"] == files
    assert unsynced_log_bytes(status) == 11 + 7 + 3   # not the indexes, queues or another "data"


def test_every_process_has_a_home_and_store_of_its_own_and_the_nameserver_a_node_alone():
    procs = rendered("rmq-controller-3")
    homes = [p.data_dir for p in procs.values()]
    assert len(set(homes)) == len(homes) == 7
    for p in procs.values():
        assert f"-Duser.home={p.data_dir}" in p.argv and p.data_dir.startswith(WORKDIRS[p.node])
        assert all(flag in p.argv for flag in ADD_OPENS)
        assert any(a.startswith("-Xmx") for a in p.argv) and "-XX:+UseSerialGC" in p.argv
    assert procs["namesrv"].node == 0 and all(p.node > 0 for n, p in procs.items() if n != "namesrv")
    broker = procs["broker-a-0"].properties
    assert broker["storePathRootDir"].startswith(procs["broker-a-0"].data_dir)
    assert int(broker["mappedFileSizeCommitLog"]) <= 64 * 1024 * 1024
    assert broker["messageIndexEnable"] == "false" and broker["timerWheelEnable"] == "true"
    assert int(broker["mappedFileSizeTimerLog"]) <= 16 * 1024 * 1024


def test_controller_mode_acks_from_the_sync_state_set_and_unclean_from_the_master_alone():
    safe = rendered("rmq-controller-3")
    assert safe["broker-a-1"].properties["allAckInSyncStateSet"] == "true"
    assert safe["broker-a-1"].properties["controllerAddr"] == "10.0.0.2:9878;10.0.0.3:9878;10.0.0.4:9878"
    assert safe["controller-0"].properties["controllerDLegerPeers"] == \
        "n0-10.0.0.2:9878;n1-10.0.0.3:9878;n2-10.0.0.4:9878"
    assert safe["controller-0"].properties["enableElectUncleanMaster"] == "false"
    unclean = rendered("rmq-controller-unclean")
    assert unclean["broker-a-1"].properties["allAckInSyncStateSet"] == "false"
    assert unclean["controller-2"].properties["enableElectUncleanMaster"] == "true"


def test_the_article_switches_reach_the_configs():
    procs = rendered("rmq-controller-3-jraft-tsp-slaveread")
    ctrl = procs["controller-1"].properties
    assert ctrl["controllerType"] == "jRaft" and ctrl["jRaftServerId"] == "10.0.0.3:9880"
    assert ctrl["jRaftControllerRPCAddr"] == "10.0.0.2:9878,10.0.0.3:9878,10.0.0.4:9878"
    broker = procs["broker-a-0"].properties
    assert broker["transientStorePoolEnable"] == "true" and broker["slaveReadEnable"] == "true"
    dledger = rendered("rmq-dledger-3")["broker-a-2"].properties
    assert dledger["enableDLegerCommitLog"] == "true" and dledger["dLegerSelfId"] == "n2"


def _flag_mb(argv: tuple[str, ...], flag: str) -> int:
    (value,) = [a[len(flag):] for a in argv if a.startswith(flag)]
    assert value.endswith("m")
    return int(value[:-1])


@pytest.mark.parametrize("name", ["rmq-controller-3-tsp", "rmq-controller-3-jraft-tsp-slaveread", "rmq-dledger-3-tsp"])
def test_a_transient_store_pool_fits_the_brokers_direct_memory_and_keeps_a_buffer_free(name):
    # With every buffer borrowed RocketMQ refuses every send as "system busy": the file
    # being written and the one allocated ahead hold one each, and at a roll the old
    # file keeps its buffer until it is committed while a third is allocated ahead.
    plain = rendered(name.replace("-tsp", ""))["broker-a-0"]
    for proc in rendered(name).values():
        if proc.role != "broker":
            continue
        props = proc.properties
        assert props["transientStorePoolEnable"] == "true"
        pool_mb = int(props["transientStorePoolSize"]) * int(props["mappedFileSizeCommitLog"]) // 2 ** 20
        assert int(props["transientStorePoolSize"]) >= 4
        direct = _flag_mb(proc.argv, "-XX:MaxDirectMemorySize=")
        assert direct >= pool_mb + _flag_mb(plain.argv, "-XX:MaxDirectMemorySize=")
    assert plain.properties["transientStorePoolEnable"] == "false"


def test_timing_fast_shortens_failure_detection_where_rocketmq_lets_it():
    assert failure_detection_s("rmq-controller-3", "fast") < failure_detection_s("rmq-controller-3", "default")
    assert rendered("rmq-controller-3", "default")["broker-a-0"].properties["controllerHeartBeatTimeoutMills"] == "10000"
    # DLedger's election timing is not configurable through the broker.
    assert failure_detection_s("rmq-dledger-3", "fast") == failure_detection_s("rmq-dledger-3", "default")


@pytest.fixture
def crash_fs():
    """Crash faults are checked against the machine before the profile (root, FUSE)."""
    require(crash_fs_unavailable() is None, f"needs FUSE: {crash_fs_unavailable()}")


@pytest.mark.parametrize("profile, values", [
    ("rmq-controller-3", {"faults": ["leader-crash"]}),
    ("rmq-controller-3", {"faults": ["random-crash", "minor-crash"], "targets": ["brokers"]}),
    ("rmq-controller-3", {"faults": ["noop"], "overlap": ["leader-crash"]}),
    ("rmq-controller-3", {"faults": ["fixed-crash:targets=n1,n2"]}),   # the nameserver and one broker
    ("rmq-dledger-3", {"faults": ["leader-crash"]}),
    ("rmq-controller-unclean", {"faults": ["major-crash"]}),
    ("rmq-single-sync", {"faults": ["leader-disk-error:ops=fsync"], "overlap": ["leader-crash"]}),
])
def test_crashes_a_profile_promises_to_survive_or_is_expected_to_lose_are_accepted(tmp_path, crash_fs,
                                                                                    profile, values):
    spec = build_spec({"profile": profile, "store": tmp_path / "store", "nodes": 4, **values})
    assert spec.profile == profile


@pytest.mark.parametrize("profile, values", [
    ("rmq-controller-3", {"faults": ["major-crash"]}),
    ("rmq-dledger-3", {"faults": ["major-crash"], "targets": ["brokers"]}),
    ("rmq-controller-3", {"faults": ["noop"], "overlap": ["major-crash"]}),
    ("rmq-controller-3", {"faults": ["fixed-crash:targets=n2,n3"]}),
    ("rmq-controller-3-jraft", {"faults": ["major-crash"], "targets": ["controllers"]}),  # same machines
    ("rmq-master-slave-sync", {"faults": ["leader-crash"], "nodes": 3}),
])
def test_a_crash_that_may_lose_acknowledged_messages_is_refused_on_safe_profiles(tmp_path, crash_fs, profile, values):
    with pytest.raises(SpecError, match="loses? acknowledged messages by design"):
        build_spec({"profile": profile, "store": tmp_path / "store", "nodes": 4, **values})


@pytest.mark.parametrize("values, message", [
    ({"workload": "register"}, "real RocketMQ has no key-value store"),
    ({"bugs": ["ack-without-sync-state-set"]}, "the bug library lives in the model SUT"),
])
def test_what_cannot_apply_to_real_rocketmq_is_refused_with_its_reason(tmp_path, values, message):
    spec = {"profile": "rmq-controller-3", "store": tmp_path / "store", "nodes": 4, **values}
    with pytest.raises(SpecError, match=message):
        build_spec(spec)


@pytest.mark.parametrize("args, message", [
    (["--fault", "major-crash"], "a crash of a majority of a broker group at once may lose"),
    (["--workload", "register"], "real RocketMQ has no key-value store"),
    (["--nodes", "3"], "profile rmq-controller-3 needs 4 nodes"),
    (["--bug", "read-beyond-confirm-offset"], "the bug library lives in the model SUT"),
])
def test_chaos_run_refuses_them_in_one_line_before_anything_starts(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["run", "--profile", "rmq-controller-3", *args, "--store", str(tmp_path / "s")])
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert not (tmp_path / "s").exists()


def test_the_article_campaign_is_the_full_matrix_and_a_dry_run_prints_its_size():
    result = CliRunner().invoke(cli, ["campaign", str(REPO / "campaigns" / "rocketmq-article.yaml"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "168 runs (8 profiles x 1 workloads x 7 faults x 3 repeats)" in result.output


def test_the_short_article_campaign_crosses_both_ends_of_the_switches_with_the_articles_faults():
    result = CliRunner().invoke(cli, ["campaign", str(REPO / "campaigns" / "rocketmq-article-short.yaml"),
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "8 runs (2 profiles x 1 workloads x 4 faults x 1 repeats)" in result.output
    assert "rmq-controller-3-jraft-tsp-slaveread-queue-random-loss-probability-0.8-r1" in result.output


def test_a_sync_state_set_member_whose_broker_registered_again_under_another_id_is_not_its_nodes_broker():
    # After a crash took its identity file, the broker at .3 is brokerId 4; the
    # controllers still list its old id 1 in the SyncStateSet.
    info = {"in_sync": [{"id": 1, "addr": "10.0.0.3:10911", "alive": False},
                        {"id": 2, "addr": "10.0.0.4:10911", "alive": True}],
            "not_in_sync": [{"id": 4, "addr": "10.0.0.3:10911", "alive": True},
                            {"id": 3, "addr": "10.0.0.2:10911", "alive": False}]}
    assert [r["id"] for r in live_sync_state_members(info)] == [2]
    # A member that is merely down (nothing else at its address) stays: it may return.
    info["not_in_sync"] = info["not_in_sync"][1:]
    assert [r["id"] for r in live_sync_state_members(info)] == [1, 2]
