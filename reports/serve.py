"""Serving a store over HTTP, like Jepsen's `serve`: an index of campaigns newest
first with links to each run's report, and the store's files beneath it.

Only files under the store are served: a path is resolved (symlinks included)
and must stay inside the store's real root, else 404, so `/../../etc/passwd`
or a symlink that leads out of the store gets nothing.
"""
from __future__ import annotations

import datetime as _dt
import gzip
import http.server
import io
import os
import shutil
import tempfile
import threading
import time
import urllib.parse
from functools import partial
from pathlib import Path
from typing import Any

from records import CampaignJson
from reports.assets import install_assets
from reports.load import campaign_dirs, load_run, read_store_file, run_dirs
from reports.render import environment

ASSETS_URL = "/_chaos/assets/"
# Collected node logs and the store's own line files read as text in the browser, not as downloads.
TEXT_SUFFIXES = (".log", ".out", ".err", ".txt", ".jsonl", ".yaml", ".yml", ".properties", ".conf", ".cfg",
                 ".edn", ".csv")
COMPRESSED_TYPES = ("text/", "application/json", "application/javascript", "text/javascript", "image/svg+xml")
GZIP_LIMIT = 64 * 1024 * 1024   # bigger files go as they are: compressing them in memory costs too much


def store_index(store_root: Path) -> list[dict[str, Any]]:
    """The campaigns of a store, newest first, each with its runs and their verdicts."""
    campaigns = []
    for campaign in campaign_dirs(store_root):
        meta, problem = read_store_file(CampaignJson, campaign / "campaign.json")
        runs = []
        for run_dir in run_dirs(campaign):
            facts = load_run(run_dir)
            runs.append(dict(id=facts.run_id, valid=facts.valid if facts.results else None,
                             profile=facts.get("profile"), workload=facts.get("workload"),
                             faults=facts.get("faults"), status=facts.run.get("status"),
                             report=(facts.report.relative_to(store_root).as_posix() if facts.report.is_file() else None),
                             path=run_dir.relative_to(store_root).as_posix()))
        campaigns.append(dict(id=campaign.name, kind=(meta or {}).get("kind") if isinstance(meta, dict) else None,
                              problem=problem if not problem or not problem.endswith("missing") else None,
                              index=f"{campaign.name}/index.html" if (campaign / "index.html").is_file() else None,
                              compare=f"{campaign.name}/compare.html" if (campaign / "compare.html").is_file()
                              else None,
                              runs=runs))
    return campaigns


def render_store_index(store_root: Path) -> str:
    template = environment().get_template("store.html.j2")
    return template.render(assets=ASSETS_URL.rstrip("/"), campaigns=store_index(store_root),
                           store=str(store_root), generated_at=_dt.datetime.now(_dt.timezone.utc)
                           .strftime("%Y-%m-%d %H:%M:%S UTC"),
                           nav=[dict(label="campaigns", href="/", current=True)],
                           trend="trend.html" if (store_root / "trend.html").is_file() else None)


def inside(root: Path, candidate: Path) -> bool:
    """Whether `candidate`, with every symlink resolved, lies under `root` (already resolved)."""
    try:
        Path(os.path.realpath(candidate)).relative_to(root)
    except ValueError:
        return False
    return True


class StoreHandler(http.server.SimpleHTTPRequestHandler):
    """Files of the store (never outside it), `/` as the campaign index, the pages' assets."""

    server_version = "chaos-serve"
    timeout = 30  # seconds a client may keep its connection silent: a stalled peer frees its thread

    def __init__(self, *args: Any, store_root: Path, assets_dir: Path, **kwargs: Any) -> None:
        self.store_root = store_root
        self.assets_dir = assets_dir
        super().__init__(*args, directory=str(store_root), **kwargs)

    def _request_path(self) -> str:
        return urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)

    def send_head(self):  # type: ignore[override]
        path = self._request_path()
        if path in ("/", "/index.html") and not (self.store_root / "index.html").is_file():
            return self._send_html(self.server.store_index_html())
        if path.startswith(ASSETS_URL):
            name = path[len(ASSETS_URL):]
            target = self.assets_dir / name
            if "/" in name or not target.is_file():
                self.send_error(404, "File not found")
                return None
            return self._send_file(target)
        # Refuse anything whose raw path climbs, and anything that resolves outside the store.
        if ".." in path.split("/") or not inside(self.store_root, Path(self.translate_path(self.path))):
            self.send_error(404, "File not found")
            return None
        target = Path(self.translate_path(self.path))
        if target.is_file() and self._gzip_wanted(self.guess_type(str(target)), target.stat().st_size):
            return self._send_file(target)
        return super().send_head()

    def guess_type(self, path: Any) -> str:  # type: ignore[override]
        """Logs (broker.log, broker.log.1, gc.log.0.current) and line files as UTF-8 text."""
        name = Path(str(path)).name.lower()
        if name.endswith(".html"):
            return "text/html; charset=utf-8"
        if any(part in TEXT_SUFFIXES for part in (f".{p}" for p in name.split(".")[1:])) or name.endswith(".log"):
            return "text/plain; charset=utf-8"
        return super().guess_type(path)

    def _gzip_wanted(self, content_type: str, size: int) -> bool:
        accepted = self.headers.get("Accept-Encoding", "")
        return ("gzip" in [a.split(";")[0].strip() for a in accepted.split(",")]
                and content_type.startswith(COMPRESSED_TYPES) and size <= GZIP_LIMIT)

    def _send_body(self, body: bytes, content_type: str):
        """A body, gzip-compressed when the client accepts it and the type gains from it."""
        compressed = self._gzip_wanted(content_type, len(body))
        if compressed:
            body = gzip.compress(body, compresslevel=6)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Vary", "Accept-Encoding")
        if compressed:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        return io.BytesIO(body)

    def _send_html(self, text: str):
        return self._send_body(text.encode("utf-8"), "text/html; charset=utf-8")

    def _send_file(self, target: Path):
        content_type = self.guess_type(str(target))
        if self._gzip_wanted(content_type, target.stat().st_size):
            return self._send_body(target.read_bytes(), content_type)
        handle = open(target, "rb")  # noqa: SIM115 - closed by the base class after copying
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(os.fstat(handle.fileno()).st_size))
        self.end_headers()
        return handle

    def list_directory(self, path):  # type: ignore[override]
        if not inside(self.store_root, Path(path)):
            self.send_error(404, "File not found")
            return None
        return super().list_directory(path)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)


class StoreServer(http.server.ThreadingHTTPServer):
    """The HTTP server of one store; closing it removes its temporary copy of the assets."""

    daemon_threads = True
    index_ttl_s = 5.0  # `/` reads every run of the store: at most once per this many seconds

    def __init__(self, address: tuple[str, int], store_root: Path, verbose: bool = False) -> None:
        self.verbose = verbose
        self.store_root = store_root
        self._index: tuple[float, str] | None = None
        self._index_lock = threading.Lock()
        self.assets_dir = install_assets(Path(tempfile.mkdtemp(prefix="chaos-serve-")))
        handler = partial(StoreHandler, store_root=store_root, assets_dir=self.assets_dir)
        try:
            super().__init__(address, handler)
        except OSError:
            shutil.rmtree(self.assets_dir.parent, ignore_errors=True)
            raise

    def store_index_html(self) -> str:
        """The campaign index, rendered again only when the last one is older than index_ttl_s."""
        with self._index_lock:
            now = time.monotonic()
            if self._index is None or now - self._index[0] > self.index_ttl_s:
                self._index = (now, render_store_index(self.store_root))
            return self._index[1]

    def server_close(self) -> None:
        super().server_close()
        shutil.rmtree(self.assets_dir.parent, ignore_errors=True)


def make_server(store_root: Path, bind: str = "127.0.0.1", port: int = 8080,
                verbose: bool = False) -> StoreServer:
    """An HTTP server for the store (not yet serving: call serve_forever)."""
    return StoreServer((bind, port), Path(os.path.realpath(store_root)), verbose)
