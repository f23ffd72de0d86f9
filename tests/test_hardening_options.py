"""Typed fault options: converted and checked by the registry, for built-ins and plugins."""
from __future__ import annotations

import pytest

import faults
from faults import registry
from faults.options import Duration, NodeNames, Port, RemotePath
from faults.registry import create


@pytest.mark.parametrize("given,stored", [(9, "KILL"), ("9", "KILL"), ("kill", "KILL"), ("SIGTERM", "TERM"),
                                          ("term", "TERM"), (15, "TERM"), ("QUIT", "QUIT")])
def test_a_kill_signal_is_accepted_by_name_or_number_and_stored_as_its_name(given, stored):
    assert create("random-kill", signal=given).signal == stored


@pytest.mark.parametrize("given", [0, "0", 99, "STOP", "SIGCONT", "TSTP", "abc", "9;id", "", -9, True, [9]])
def test_signals_that_kill_nothing_or_are_not_in_the_table_are_refused(given):
    with pytest.raises(faults.FaultError, match=r"fault random-kill: option signal=.*: .*allowed"):
        create("random-kill", signal=given)


@pytest.mark.parametrize("given", [0, -0.1, 1.01, "nan", "inf", "0.3;id", "often"])
def test_a_loss_probability_outside_zero_to_one_is_refused(given):
    with pytest.raises(faults.FaultError, match=r"fault random-loss: option probability="):
        create("random-loss", probability=given)


def test_fixed_targets_are_node_names_given_as_one_name_or_a_list():
    assert create("fixed-partition", targets="n1").fixed == ["n1"]
    assert create("fixed-kill", targets=["n1", "n2"]).fixed == ["n1", "n2"]
    with pytest.raises(faults.FaultError, match=r"'n1 n2' is not a node name"):
        create("fixed-kill", targets=["n1 n2"])


class SlowDisk:
    """A plugin with typed options of every kind the options module offers."""

    name = "hardening-slow-disk"
    description = "test plugin"

    def __init__(self, seconds: Duration = 1.0, port: Port = 9876, path: RemotePath = "/var/tmp",
                 nodes: NodeNames = (), note: "UnknownType" = "") -> None:  # noqa: F821
        self.seconds, self.port, self.path, self.nodes, self.note = seconds, port, path, nodes, note

    def start(self, ctx):
        return None

    def stop(self, ctx, handle):
        return None


@pytest.fixture(scope="module")
def plugin():
    registry.register(SlowDisk, origin="test")
    yield SlowDisk.name
    registry._registry.pop(SlowDisk.name, None)


def test_a_plugin_s_typed_options_are_converted(plugin):
    made = create(plugin, seconds="2.5", port="80", path="/data/x", nodes="n3", note=7)
    assert (made.seconds, made.port, made.path, made.nodes, made.note) == (2.5, 80, "/data/x", ("n3",), 7)


@pytest.mark.parametrize("option,value,message", [
    ("seconds", 0, "duration must be > 0 seconds"),
    ("seconds", "-1", "duration must be > 0 seconds"),
    ("port", 70000, "less than or equal to 65535"),
    ("path", "/tmp/$(id)", "should match pattern"),
    ("path", "relative/dir", "should match pattern"),
    ("nodes", "n1;reboot", "is not a node name"),
])
def test_a_plugin_s_bad_option_names_the_fault_the_option_and_what_is_allowed(plugin, option, value, message):
    with pytest.raises(faults.FaultError) as error:
        create(plugin, **{option: value})
    text = str(error.value)
    assert text.startswith(f"fault {plugin}: option {option}=") and message in text and "allowed" in text
