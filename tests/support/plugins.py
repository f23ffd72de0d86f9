"""Plugins as users ship them: the example a docs page shows, built into a real wheel
and installed with pip into a directory of its own."""
from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path


def example_from_docs(page: Path, heading: str, group: str) -> tuple[str, str, str]:
    """The plugin module, its project name and its one entry point line of `group`, exactly as
    the first python and toml blocks after `heading` in `page` show them."""
    text = page.read_text()
    section = text[text.index(heading):]
    module = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    project = tomllib.loads(re.search(r"```toml\n(.*?)```", section, re.S).group(1))["project"]
    [(name, target)] = project["entry-points"][group].items()
    return module, project["name"], f"{name} = {target}"


def build_wheel(directory: Path, project: str, module: str, group: str, entry: str) -> Path:
    """A wheel of one module and one entry point. A wheel is a zip with a dist-info
    directory; writing one needs no build backend."""
    package = project.replace("-", "_")
    dist = f"{package}-0.1.dist-info"
    files = {
        f"{package}.py": module,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: 0.1\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[{group}]\n{entry}\n",
    }
    record = []
    for name, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(content.encode())}")
    record.append(f"{dist}/RECORD,,")
    path = directory / f"{package}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, content in files.items():
            wheel.writestr(name, content)
        wheel.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return path


def install_example(work: Path, page: Path, heading: str, group: str) -> Path:
    """The docs example built into a wheel and installed by pip into `work`/site; returns
    that directory (put it on PYTHONPATH or sys.path to use the plugin)."""
    module, project, entry = example_from_docs(page, heading, group)
    wheel = build_wheel(work, project, module, group, entry)
    site = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)], check=True, timeout=300)
    return site


DOCS = Path(__file__).resolve().parents[2] / "docs"
CHAOS = str(Path(sys.executable).parent / "chaos")


def example_site(page: str, heading: str, group: str):
    """A module-scoped fixture: the example under `heading` of docs/`page`, installed once
    per test module; its value is the directory to put on sys.path or PYTHONPATH."""
    import pytest

    @pytest.fixture(scope="module")
    def site(tmp_path_factory) -> Path:
        return install_example(tmp_path_factory.mktemp("plugin"), DOCS / page, heading, group)
    return site


def own_registry(registry):
    """A fixture: a copy of `registry`'s table (the checkers' or the workloads') with the
    built-ins, so that a test's registrations do not stay."""
    import pytest

    @pytest.fixture
    def fixture(monkeypatch):
        registry.known()
        monkeypatch.setattr(registry, "_registry", dict(registry._registry))
        yield
        monkeypatch.undo()
        registry.load_plugins(reload=True)
    return fixture
