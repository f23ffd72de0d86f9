"""Controller mode with real processes: `python -m sut` on loopback, real SIGKILL /
SIGSTOP, free ports, temp dirs. Timing is the "fast" scale with a few values
widened so a loaded 2-core machine does not flap; every wait polls."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import pytest

from support.controller import (QUEUES, TOPIC, brokers, controller_cluster, current_master, ha, raw_send,
                                read_all_message_ids, send_many, wait_until)
from support.sut import status_of
from sut import admin
from sut.local import LocalCluster
from sut.message import decode_payload, iter_records
from sut.profiles import BROKER_BASE, CONTROLLER_HA, NAMESRV, Peers, ProcessSpec, Profile
from sut.protocol import RequestCode, ResponseCode


def run(coro):
    return asyncio.run(coro)


def pull_fields(addr: str, queue: int = 0) -> dict:
    """The header fields of one PULL_MESSAGE from offset 0."""
    return run(admin.call(addr, RequestCode.PULL_MESSAGE, {
        "topic": TOPIC, "queue_id": queue, "offset": 0, "max_count": 1})).fields


def read_broker(addr: str) -> list[str]:
    """Every message id a broker lets consumers see (up to its confirm offset), queue order."""
    async def go():
        ids = []
        for queue in range(QUEUES):
            offset = 0
            while True:
                reply = await admin.call(addr, RequestCode.PULL_MESSAGE, {
                    "topic": TOPIC, "queue_id": queue, "offset": offset, "max_count": 32})
                if reply.code != ResponseCode.SUCCESS:
                    break
                records = list(iter_records(reply.body))
                ids += [decode_payload(payload).msg_id for _, payload in records]
                offset = reply.fields["next_offset"]
        return ids
    return run(go())



def controller_reply(c: LocalCluster, name: str, code: int, fields: dict):
    return run(admin.call(c.address(name), code, fields, timeout=3.0))


def active_controller(c: LocalCluster) -> str | None:
    for name, proc in c.processes.items():
        if proc.role == "controller":
            st = status_of(c, name)
            if st and st.get("is_leader"):
                return name
    return None


def test_master_kill_elects_an_sss_member_at_the_next_epoch_and_the_old_master_rejoins(tmp_path):
    with controller_cluster("controller-3", tmp_path) as c:
        c.start_all(timeout=60)
        acked = send_many(c, 24, "before")
        assert len(acked) == 24
        old = wait_until(lambda: (m := current_master(c)) and
                         ha(status_of(c, m))["sync_state_set"] == [1, 2, 3] and m, 30,
                         "the master's SyncStateSet to hold all three brokers")
        before = ha(status_of(c, old))
        c.kill(old, signal.SIGKILL)
        new = wait_until(lambda: current_master(c, exclude=old), 30, "a new master")
        after = ha(status_of(c, new))
        assert after["master_epoch"] == before["master_epoch"] + 1
        assert after["controller_broker_id"] in before["sync_state_set"]
        acked += send_many(c, 12, "after-master-kill")
        assert len(acked) == 36

        # the active controller dies: another one serves the same metadata
        leader = active_controller(c)
        info = controller_reply(c, leader, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                {"broker_name": "broker-a"}).fields
        c.kill(leader, signal.SIGKILL)
        successor = wait_until(lambda: active_controller(c), 30, "a new active controller")
        again = wait_until(lambda: (r := controller_reply(
            c, successor, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": "broker-a"}))
            .code == ResponseCode.SUCCESS and r.fields, 30, "replica info from the new controller")
        assert (again["master_id"], again["master_epoch"]) == (info["master_id"], info["master_epoch"])
        acked += send_many(c, 12, "after-controller-kill")
        assert len(acked) == 48

        # the old master comes back as a slave and ends with exactly the master's log
        c.start(old)
        wait_until(lambda: (s := status_of(c, old)) and s["ready"] and s["ha_role"] == "slave"
                   and s["max_offset"] == status_of(c, new)["max_offset"], 30,
                   "the old master to rejoin as a slave and catch up")
        assert set(acked) <= set(read_all_message_ids(c.namesrv_addrs))
        assert sorted(read_broker(c.address(old))) == sorted(read_broker(c.address(new)))


def test_old_master_truncates_its_unreplicated_tail_to_the_consistent_point(tmp_path):
    with controller_cluster("controller-2", tmp_path) as c:
        c.start_all(timeout=60)
        acked = send_many(c, 10, "replicated")
        master = wait_until(lambda: (m := current_master(c)) and
                            ha(status_of(c, m))["sync_state_set"] == [1, 2] and m, 30,
                            "both brokers in the SyncStateSet")
        slave = next(b for b in brokers(c) if b != master)
        wait_until(lambda: status_of(c, slave)["max_offset"] == status_of(c, master)["max_offset"], 20,
                   "the slave to catch up")
        replicated_end = status_of(c, slave)["max_offset"]
        # Without controllers the master cannot drop the dead slave from the SSS, so
        # what it appends now is on the master only (and never acknowledged).
        controllers = [n for n, p in c.processes.items() if p.role == "controller"]
        for name in controllers:
            c.kill(name, signal.SIGKILL)
        c.kill(slave, signal.SIGKILL)
        lost = [f"unreplicated-{i}" for i in range(3)]
        for msg_id in lost:
            assert raw_send(c.address(master), msg_id) == ResponseCode.FLUSH_SLAVE_TIMEOUT
        st = status_of(c, master)
        assert st["confirm_offset"] == replicated_end < st["max_offset"]
        # A pull then says the master's log is not all confirmed: "nothing more" from it
        # is not the end of the log (the durability audit waits for a confirmed answer).
        assert pull_fields(c.address(master))["log_confirmed"] is False
        assert ha(st)["pending_sss"] == [1] or ha(st)["sync_state_set"] == [1, 2]
        c.kill(master, signal.SIGKILL)
        for name in controllers:
            c.start(name)
        c.start(slave)  # the only live SSS member: it is elected
        wait_until(lambda: current_master(c) == slave, 30, "the slave to take over")
        epoch = ha(status_of(c, slave))["master_epoch"]
        assert epoch == 2 and ha(status_of(c, slave))["epochs"][-1] == [epoch, replicated_end]
        acked += send_many(c, 8, "new-epoch")
        assert len(acked) == 18
        c.start(master)
        wait_until(lambda: (s := status_of(c, master)) and s["ha_role"] == "slave"
                   and s["max_offset"] == status_of(c, slave)["max_offset"], 30,
                   "the old master to rejoin and catch up")
        link = ha(status_of(c, master))["slave_link"]
        assert link["truncations"] and link["truncations"][0][1] == replicated_end
        assert ha(status_of(c, master))["epochs"] == ha(status_of(c, slave))["epochs"]
        old_view, new_view = read_broker(c.address(master)), read_broker(c.address(slave))
        assert sorted(old_view) == sorted(new_view)
        assert set(acked) <= set(new_view)
        assert not set(lost) & set(new_view)


def test_all_ack_with_a_stopped_slave_times_out_and_holds_the_confirm_offset_until_the_sss_shrinks(
        tmp_path):
    with controller_cluster("controller-2", tmp_path, heartbeat_timeout_ms=60000,
                      ha_max_time_slave_not_catchup_ms=4000) as c:
        c.start_all(timeout=60)
        send_many(c, 4, "warmup")
        master = wait_until(lambda: (m := current_master(c)) and
                            ha(status_of(c, m))["sync_state_set"] == [1, 2] and m, 30, "SSS {1,2}")
        slave = next(b for b in brokers(c) if b != master)
        addr = c.address(master)
        wait_until(lambda: status_of(c, master)["confirm_offset"] == status_of(c, master)["max_offset"],
                   10, "the confirm offset to reach the log end")
        confirm = status_of(c, master)["confirm_offset"]
        visible = run(admin.call(addr, RequestCode.QUERY_MAX_OFFSET,
                                 {"topic": TOPIC, "queue_id": 0})).fields["offset"]
        c.send_signal(slave, signal.SIGSTOP)
        try:
            assert raw_send(addr, "stuck-1") == ResponseCode.FLUSH_SLAVE_TIMEOUT
            st = status_of(c, master)
            assert st["confirm_offset"] == confirm < st["max_offset"]
            assert run(admin.call(addr, RequestCode.QUERY_MAX_OFFSET,
                                  {"topic": TOPIC, "queue_id": 0})).fields["offset"] == visible
            wait_until(lambda: ha(status_of(c, master))["sync_state_set"] == [
                ha(status_of(c, master))["controller_broker_id"]], 30, "the SSS to shrink")
            assert raw_send(addr, "after-shrink") == ResponseCode.SUCCESS
            assert status_of(c, master)["confirm_offset"] == status_of(c, master)["max_offset"]
            assert run(admin.call(addr, RequestCode.QUERY_MAX_OFFSET,
                                  {"topic": TOPIC, "queue_id": 0})).fields["offset"] == visible + 2
        finally:
            c.send_signal(slave, signal.SIGCONT)
        wait_until(lambda: ha(status_of(c, master))["sync_state_set"] == [1, 2], 30,
                   "the slave to catch up and rejoin the SSS")


def test_replication_continues_with_every_controller_down(tmp_path):
    with controller_cluster("controller-3", tmp_path) as c:
        c.start_all(timeout=60)
        master = wait_until(lambda: (m := current_master(c)) and
                            ha(status_of(c, m))["sync_state_set"] == [1, 2, 3] and m, 30, "full SSS")
        for name in [n for n, p in c.processes.items() if p.role == "controller"]:
            c.kill(name, signal.SIGKILL)
        acked = send_many(c, 20, "no-controllers")
        assert len(acked) == 20
        end = status_of(c, master)["max_offset"]
        for name in brokers(c):
            wait_until(lambda name=name: status_of(c, name)["max_offset"] == end, 20,
                       f"{name} to replicate without controllers")
        assert set(acked) <= set(read_broker(c.address(master)))


def test_broker_is_fenced_until_it_registers_and_keeps_its_id_across_restarts(tmp_path):
    with controller_cluster("controller-2", tmp_path) as c:
        c.start("namesrv")
        c.start("broker-a-0")
        wait_until(lambda: status_of(c, "broker-a-0") is not None, 30, "the broker to listen")
        assert not status_of(c, "broker-a-0")["ready"]
        assert raw_send(c.address("broker-a-0"), "fenced", timeout=3) == \
            ResponseCode.SERVICE_NOT_AVAILABLE
        for name in ("controller-0", "controller-1", "controller-2"):
            c.start(name)
        wait_until(lambda: current_master(c) == "broker-a-0", 30, "broker-a-0 to become master")
        identity = json.loads((c.data_dir("broker-a-0") / "broker_identity.json").read_text())
        c.stop("broker-a-0")
        c.start("broker-a-0")
        wait_until(lambda: (s := status_of(c, "broker-a-0")) and s["ready"], 30, "the restart")
        assert ha(status_of(c, "broker-a-0"))["controller_broker_id"] == identity["broker_id"]
        assert not (c.data_dir("broker-a-0") / "broker_identity.pending.json").exists()


def test_a_learner_replicates_but_never_joins_the_sync_state_set(tmp_path):
    with controller_cluster("controller-3", tmp_path, brokers={"broker-a-2": {"async_learner": True}}) as c:
        c.start("namesrv")
        for name in ("controller-0", "controller-1", "controller-2", "broker-a-0"):
            c.start(name)
        wait_until(lambda: current_master(c) == "broker-a-0", 60, "broker-a-0 as master")
        c.start("broker-a-1")
        c.start("broker-a-2")  # joins late: a new broker that must catch up
        c.wait_ready(["broker-a-1", "broker-a-2"], timeout=60)
        acked = send_many(c, 16, "learner")
        end = status_of(c, "broker-a-0")["max_offset"]
        wait_until(lambda: status_of(c, "broker-a-2")["max_offset"] == end, 30, "the learner to catch up")
        learner_id = ha(status_of(c, "broker-a-2"))["controller_broker_id"]
        other_id = ha(status_of(c, "broker-a-1"))["controller_broker_id"]
        wait_until(lambda: ha(status_of(c, "broker-a-0"))["sync_state_set"] == [1, other_id], 30,
                   "the other slave to join the SSS")
        send_many(c, 4, "more")
        assert learner_id not in ha(status_of(c, "broker-a-0"))["sync_state_set"]
        assert ha(status_of(c, "broker-a-2"))["learner"]
        assert set(acked) <= set(read_broker(c.address("broker-a-2")))


def test_controllers_embedded_in_the_nameservers_run_the_group(tmp_path):
    namesrv = {**NAMESRV, "controller_port": 9878, "controller_raft_port": 9880,
               "controller": {"controller_addrs": Peers("namesrv", "controller_port"),
                              "raft_addrs": Peers("namesrv", "controller_raft_port"),
                              "raft_timing": "test"}}
    ha_cfg = {**CONTROLLER_HA, "controller_addrs": Peers("namesrv", "controller_port"),
              "all_ack_in_sync_state_set": True}
    profile = Profile("embedded", "controllers inside 3 nameservers", (
        *(ProcessSpec(f"namesrv-{i}", "namesrv", i, namesrv) for i in range(3)),
        *(ProcessSpec(f"broker-a-{i}", "broker", i, {**BROKER_BASE, "broker_name": "broker-a",
                                                     "ha_mode": "controller", "ha": ha_cfg})
          for i in range(2))))
    with controller_cluster(profile, tmp_path) as c:
        c.start_all(timeout=60)
        assert len(send_many(c, 8, "embedded")) == 8
        master = wait_until(lambda: current_master(c), 30, "a master")
        c.kill(master, signal.SIGKILL)
        wait_until(lambda: current_master(c, exclude=master), 30, "failover")
        assert len(send_many(c, 4, "embedded-after")) == 4


@pytest.mark.parametrize("config, message", [
    ({"data_dir": "{d}", "controller_addrs": ["127.0.0.1:1"], "raft_addrs": ["127.0.0.1:2"],
      "port": 5, "raft_port": 2}, "is not in controller_addrs"),
    ({"data_dir": "{d}", "controller_addrs": ["127.0.0.1:1"], "raft_addrs": []},
     "must list the same controllers"),
    ({"data_dir": "{d}", "controller_addrs": ["127.0.0.1:1"], "raft_addrs": ["127.0.0.1:2"],
      "port": 1, "raft_port": 2, "raft_timing": "warp"}, "unknown preset"),
    ({"data_dir": "{d}", "controller_addrs": ["127.0.0.1:1"], "raft_addrs": ["127.0.0.1:2"],
      "elect_master_retrys": 3}, "unknown field 'elect_master_retrys'"),
])
def test_a_bad_controller_config_is_one_line_naming_the_problem(tmp_path, config, message):
    path = tmp_path / "controller.json"
    path.write_text(json.dumps(config).replace("{d}", str(tmp_path / "data")))
    done = subprocess.run([sys.executable, "-m", "sut", "controller", "--config", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0], done.stderr
