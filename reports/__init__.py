"""HTML reports: run reports, timelines and (reports.campaign) campaign pages.

    render_run(run_dir)  -> run_dir/report/index.html (+ timeline.html, downloads)
    render_path(path)    -> every page under a run, a campaign or a whole store

The shared pieces other pages build on: reports.assets.install_assets,
reports.render.render_page / environment, reports.charts.figure_div,
reports.load (tolerant readers), templates base.html.j2 and macros.html.j2.
"""
from __future__ import annotations

from pathlib import Path

from reports.load import campaign_dirs, is_campaign_dir, is_run_dir, is_store, old_store_file, run_dirs


class ReportError(Exception):
    """The path cannot be reported on (not a run, campaign or store): one line."""


def render_run(run_dir: Path) -> Path:
    """Render one run's report; returns the path of its index.html."""
    from reports.run_report import render_run_report
    return render_run_report(Path(run_dir))


def render_campaign_pages(campaign_dir: Path) -> list[Path]:
    """Each run's report, then the campaign's own pages (reports.campaign), if present."""
    pages = [render_run(run) for run in run_dirs(campaign_dir)]
    try:
        from reports.campaign import render_campaign
    except ImportError:
        return pages
    result = render_campaign(Path(campaign_dir))
    return pages + _as_list(result)


def render_store_pages(store_root: Path) -> list[Path]:
    """Every campaign of the store, then the store's trend page (reports.campaign), if present."""
    pages: list[Path] = []
    for campaign in campaign_dirs(store_root):
        pages += render_campaign_pages(campaign)
    try:
        from reports.campaign import render_trend
    except ImportError:
        return pages
    return pages + _as_list(render_trend(Path(store_root)))


def _as_list(result: object) -> list[Path]:
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        return [Path(p) for p in result]
    return [Path(result)]  # type: ignore[arg-type]


def render_path(path: Path) -> list[Path]:
    """Render what `path` holds: a run, a campaign, or a whole store."""
    path = Path(path)
    if not path.exists():
        raise ReportError(f"{path}: no such file or directory")
    old = old_store_file(path)
    if old is not None:
        raise ReportError(old)
    if is_campaign_dir(path):
        return render_campaign_pages(path)
    if is_run_dir(path):
        return [render_run(path)]
    if is_store(path):
        return render_store_pages(path)
    raise ReportError(f"{path}: not a run, campaign or store directory "
                      "(a run has run.json or history/, a campaign campaign.json or runs/)")
