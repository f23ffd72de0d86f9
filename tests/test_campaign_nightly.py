"""The nightly set-up of docs/nightly.md: the systemd units verify, their commands and
the documented cron line run (as dry runs) from a checkout."""
from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from harness.campaign.gates import families
from harness.campaign.model import load_campaign
from harness.campaign.plan import plan
from sut.profiles import FAULT_FAMILIES
from sut.systems import profile as get
from tests.conftest import require

REPO = Path(__file__).resolve().parent.parent
UNITS = REPO / "scripts" / "nightly"
INSTALL, STORE = "/opt/rocketmq-chaos", "/var/lib/rocketmq-chaos/store"


def installed_here(text: str, store: Path) -> str:
    """The unit/cron text as if the repository were installed at this checkout."""
    return text.replace(INSTALL, str(REPO)).replace(STORE, str(store))


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    parser.read(UNITS / name)
    return parser


def dry(command: str) -> str:
    """A documented `chaos campaign` command turned into its dry run."""
    return command.replace(" --quiet", "") + " --dry-run" if " campaign " in command else command + " --dry-run"


def test_the_systemd_units_pass_systemd_analyze_verify(tmp_path):
    require(shutil.which("systemd-analyze") is not None, "systemd-analyze missing (Debian package systemd)")
    for name in ("chaos-nightly.service", "chaos-nightly.timer"):
        (tmp_path / name).write_text(installed_here((UNITS / name).read_text(), tmp_path / "store"))
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "chaos-nightly.service"),
                             str(tmp_path / "chaos-nightly.timer")], capture_output=True, text=True, timeout=120)
    ours = [line for line in result.stderr.splitlines() if "chaos-nightly" in line]
    assert result.returncode == 0 and ours == [], result.stderr
    calendar = unit("chaos-nightly.timer")["Timer"]["OnCalendar"]
    parsed = subprocess.run(["systemd-analyze", "calendar", calendar], capture_output=True, text=True, timeout=60)
    assert parsed.returncode == 0 and "01:30:00" in parsed.stdout


def test_the_service_stops_with_sigterm_to_the_campaign_and_leaves_time_to_heal():
    service = unit("chaos-nightly.service")["Service"]
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    assert int(service["TimeoutStopSec"]) >= 120
    assert "campaigns/nightly.yaml" in service["ExecStart"] and "gc --keep-nights" in service["ExecStartPre"]


def test_the_service_commands_run_from_the_checkout(tmp_path):
    service = unit("chaos-nightly.service")["Service"]
    for key in ("ExecStartPre", "ExecStart"):
        argv = shlex.split(dry(installed_here(service[key], tmp_path / "store")))
        (tmp_path / "store").mkdir(exist_ok=True)
        result = subprocess.run(argv, cwd=installed_here(service["WorkingDirectory"], tmp_path), capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, (key, result.stdout, result.stderr)
    runs = len(plan(load_campaign(REPO / "campaigns" / "nightly.yaml")).runs)
    assert runs >= 160 and f"campaign nightly: {runs} runs" in result.stdout


def test_the_documented_cron_line_is_valid_and_runs(tmp_path):
    doc = (REPO / "docs" / "nightly.md").read_text()
    line = next(l for l in doc.splitlines() if re.match(r"^[\d*]+ [\d*]+ [\d*]+ [\d*]+ [\d*]+ cd ", l))
    fields = line.split(None, 5)
    assert 0 <= int(fields[0]) < 60 and 0 <= int(fields[1]) < 24 and fields[2:5] == ["*", "*", "*"]
    command = installed_here(fields[5], tmp_path / "store")
    command = command.split(" >>")[0]                    # keep the output here, not in /var/log
    (tmp_path / "store").mkdir()
    result = subprocess.run(["/bin/sh", "-c", dry(command)], capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "campaign nightly" in result.stdout


def test_the_nightly_plan_exercises_every_expected_unsafe_profile_under_a_family_it_is_unsafe_under():
    runs = plan(load_campaign(REPO / "campaigns" / "nightly.yaml")).runs
    unsafe = {run.profile for run in runs if not get(run.profile).expected_safe}
    assert {"controller-unclean", "master-slave-sync", "master-slave-async", "single-broker"} <= unsafe
    for profile in unsafe:
        under = set(get(profile).unsafe_under or FAULT_FAMILIES)
        assert any(families(run.fault) & under for run in runs if run.profile == profile), profile
