"""The pages' static files, copied once per folder and referenced relatively.

Plotly's JavaScript comes from the plotly Python package itself (no CDN), so
a report opens offline. A store keeps one copy (store/assets/) for its campaigns,
runs and trend page: copy a campaign elsewhere together with that folder.
"""
from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

ASSETS = "assets"
STATIC_FILES = ("report.css", "report.js")


def plotly_js() -> Path:
    """plotly.min.js as shipped inside the installed plotly package."""
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: plotly.min.js missing from the plotly package (reinstall plotly)")
    return path


def _sources() -> dict[str, Path]:
    static = Path(str(resources.files("reports") / "static"))
    return {"plotly.min.js": plotly_js(), **{name: static / name for name in STATIC_FILES}}


def store_assets_folder(campaign_dir: Path) -> Path:
    """The folder whose assets/ a campaign's pages use: the store that holds the campaign,
    so plotly.min.js (about 4 MiB) is stored once per store, not once per campaign."""
    return Path(campaign_dir).resolve().parent


def install_assets(folder: Path) -> Path:
    """Copy the assets into `<folder>/assets/` (idempotent: an up-to-date file is
    left alone) and return that directory."""
    dest = Path(folder) / ASSETS
    dest.mkdir(parents=True, exist_ok=True)
    for name, source in _sources().items():
        target = dest / name
        stat = source.stat()
        if target.is_file() and target.stat().st_size == stat.st_size and target.stat().st_mtime >= stat.st_mtime:
            continue
        tmp = target.with_name(f".{name}.tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    return dest
