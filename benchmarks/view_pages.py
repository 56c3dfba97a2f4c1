"""The web viewer's pages over HTTP on a big store: one 100,000-trial run among ~50 small ones.

The store is the one `view_queries.py` fills (a run of 1,000 tasks × 100 trials, ten smaller
runs of its suite and 40 runs of four others). `trialkit view`'s server (`ViewServer`, uvicorn
on 127.0.0.1) serves it, and each page is fetched with httpx over one kept-alive connection:
the median of `--repeats` requests after one warm-up, as a browser's request for the page's
HTML (assets are static files and not counted). The first view is timed too, on a server of
its own whose caches are empty (once its start-up warm-up, templates and imports, is done, and
its home page fetched): what the first person to open a page after the run ended waits. Usage:

    python benchmarks/view_pages.py                      # SQLite, in a temp folder
    python benchmarks/view_pages.py --store URL          # another store (an empty one)
    python benchmarks/view_pages.py --keep /tmp/view.db [--reuse]

Figures are reported in docs/performance.md; nothing here is asserted in tests. The target is
under 300 ms for every page.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from view_queries import TARGET_S, fill

from trialkit.store import Store, browse
from trialkit.store.urls import sqlite_url
from trialkit.view.server import ViewServer


def pages(store: Store) -> dict[str, str]:
    """The pages timed: every kind the viewer has, on the big run where one applies."""
    bench = [r.id for r in browse.list_runs(store, suite="bench", limit=3).rows]
    runs = "&".join(f"run={r}" for r in ["big", *bench])
    return {
        "runs (home)": "/",
        "runs, sorted by pass rate": "/?sort=pass_rate&order=desc",
        "runs, model filter, by cost": "/?model=openai%2Fgpt-4o&sort=cost",
        "run page (1,000 tasks)": "/runs/big",
        "trials, page 1": "/runs/big/trials",
        "trials, page 1,000": "/runs/big/trials?page=1000",
        "trials, failed, task glob": "/runs/big/trials?verdict=fail&task=task-09*",
        "one trial": "/runs/big/trials/task-0500/50",
        "trial JSON (API)": "/api/runs/big/trials/task-0500/50",
        "progress (API)": "/api/runs/big/progress?after=99950",
        "compare big vs small": f"/compare?a={bench[-1]}&b=big",
        "side by side": f"/diff?task=task-0001&a={bench[-1]}&b=big",
        "matrix (4 runs)": f"/matrix?{runs}",
        "matrix, page 10": f"/matrix?{runs}&page=10",
        "trends index": "/trends",
        "trend of the suite": "/trends/bench",
        "search": "/search?q=capital",
        "search + filters": "/search?q=museum&verdict=fail&run=big",
        "review queue": "/runs/big/review",
    }


def timed(client: httpx.Client, path: str, repeats: int) -> tuple[float, int, int]:
    """Median seconds, status and body size of GET `path`."""
    first = client.get(path)  # warm-up
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        client.get(path)
        times.append(time.perf_counter() - began)
    return statistics.median(times), first.status_code, len(first.content)


def first_view(store: Store, path: str) -> float:
    """Seconds of the first GET of `path` on a new server (home page fetched before)."""
    with ViewServer(store) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        server.warming.join(timeout=60)  # as a person opening a page seconds after the start
        client.get("/")
        began = time.perf_counter()
        client.get(path)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="an empty store's URL (default: a temp SQLite file)")
    parser.add_argument("--keep", type=Path, help="the SQLite file to write, and keep")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="the store is filled already")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        url = args.store or sqlite_url(args.keep or Path(temporary) / "view.db")
        with Store(url) as store:
            if not args.reuse:
                fill(store)
            listed = pages(store)
            with (
                ViewServer(store) as server,
                httpx.Client(base_url=server.url, timeout=120) as client,
            ):
                print(f"{'page':34} {'status':>6} {'KiB':>8} {'median ms':>10} {'first ms':>9}")
                for name, path in listed.items():
                    seconds, status, size = timed(client, path, args.repeats)
                    first = first_view(store, path)
                    over = max(seconds, first) >= TARGET_S or status != 200
                    print(
                        f"{name:34} {status:6} {size / 1024:8.0f} {seconds * 1000:10.1f}"
                        f" {first * 1000:9.1f}{'  over target' if over else ''}",
                        flush=True,
                    )
                    if status != 200:
                        print(f"  GET {path}: {_text(client.get(path).text)[-400:]}")


def _text(page: str) -> str:
    """A page's words, without its markup."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


if __name__ == "__main__":
    main()
