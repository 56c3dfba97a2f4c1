"""The GitHub Action's helper: summarise a run against its baseline, and post the PR comment.

    python -m trialkit.ci.github summarize --report current.json [--baseline BASE] \\
        [--report-url URL] [--comment comment.md] [--summary "$GITHUB_STEP_SUMMARY"] \\
        [--annotations] [--fail-on-regression]
    python -m trialkit.ci.github comment --body comment.md

`summarize` compares the run's JSON report with the baseline (a JSON report file, such as the
artifact of the base branch's run, or a stored run), appends the job summary (under GitHub's
1 MiB), writes the PR comment (under 65,536 characters, with the hidden marker line), prints
the annotations, and exits 1 when the run is significantly worse and `--fail-on-regression`.

`comment` posts the comment on the pull request of the event (`$GITHUB_EVENT_PATH`), or edits
the comment an earlier run posted (found by its marker line), through GitHub's REST API at
`$GITHUB_API_URL` with `$GITHUB_TOKEN`. The token is sent in a header and never printed. A
refused request (e.g. the read-only token of a pull request from a fork) is a warning, not a
failed job: the gate is the run's exit code, not the comment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trialkit.reports.github import COMMENT_MARKER

API_VERSION = "2022-11-28"
PAGE_SIZE = 100
MAX_PAGES = 50
TIMEOUT_S = 30.0


class GitHubError(Exception):
    """A request to GitHub failed; the message has the status and GitHub's message only."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trialkit.ci.github", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    summarize = commands.add_parser("summarize", help="job summary, PR comment, annotations")
    summarize.add_argument("--report", required=True, help="the run's JSON report")
    summarize.add_argument("--baseline", help="a JSON report file or a stored run")
    summarize.add_argument("--store", help="the store of a baseline given as a run")
    summarize.add_argument("--report-url", action="append", default=[], dest="report_urls")
    summarize.add_argument("--comment", help="write the PR comment's Markdown to this file")
    summarize.add_argument("--summary", help="append the job summary to this file")
    summarize.add_argument("--annotations", action="store_true")
    summarize.add_argument("--fail-on-regression", action="store_true")
    comment = commands.add_parser("comment", help="post or update the PR comment")
    comment.add_argument("--body", required=True, help="the comment's Markdown file")
    comment.add_argument("--marker", default=COMMENT_MARKER)
    args = parser.parse_args(argv)
    if args.command == "summarize":
        return summarize_run(
            Path(args.report),
            baseline=args.baseline,
            store_url=args.store,
            report_urls=args.report_urls,
            comment_path=None if args.comment is None else Path(args.comment),
            summary_path=None if args.summary is None else Path(args.summary),
            annotate=args.annotations,
            fail_on_regression=args.fail_on_regression,
        )
    return post_comment_command(Path(args.body), marker=args.marker)


# -- summarize ---------------------------------------------------------------------------------


def summarize_run(
    report_path: Path,
    *,
    baseline: str | None = None,
    store_url: str | None = None,
    report_urls: Sequence[str] = (),
    comment_path: Path | None = None,
    summary_path: Path | None = None,
    annotate: bool = False,
    fail_on_regression: bool = False,
) -> int:
    """Exit status: 1 when `fail_on_regression` and the run is significantly worse than the
    baseline, 2 when the report or baseline cannot be read, else 0."""
    from trialkit.analysis.compare import CompareError, compare_reports, load_report_ref
    from trialkit.reports.github import (
        annotations,
        render_job_summary,
        render_pr_comment,
    )
    from trialkit.reports.json import ReportFormatError, load_json_report

    try:
        report = load_json_report(report_path.read_bytes())
    except (OSError, ReportFormatError) as exc:
        _warn(f"no report to summarize at {report_path}: {_reason(exc)}")
        return 2
    comparison = None
    if baseline and _baseline_missing(baseline):
        _warn(f"the baseline {baseline} does not exist: the run is not compared")
    elif baseline:
        try:
            store = None if baseline.lower().endswith(".json") else _open_store(store_url)
            base = load_report_ref(baseline, store)
            comparison = compare_reports([base, report])
        except (CompareError, LookupError, ReportFormatError) as exc:
            _warn(f"cannot compare with the baseline {baseline}: {exc}")
            return 2
    if comparison is not None:
        body = render_pr_comment(comparison, report_urls=report_urls, blob_url=_blob_url())
    else:
        body = COMMENT_MARKER + "\n" + render_job_summary(report, limit=65_536 - 100)
    if comment_path is not None:
        comment_path.write_text(body, encoding="utf-8")
    if summary_path is not None:
        summary = render_job_summary(
            report, comparison=comparison, report_urls=report_urls, blob_url=_blob_url()
        )
        with summary_path.open("a", encoding="utf-8") as out:
            out.write(summary)
    if annotate:
        for line in annotations(comparison if comparison is not None else report):
            print(line)
    outcome = comparison.pairs[0].outcome if comparison is not None else "no_baseline"
    _set_output("outcome", outcome)
    if comparison is not None:
        print(comparison.pairs[0].conclusion)
    if fail_on_regression and outcome == "worse":
        print("regression: the run is significantly worse than the baseline", file=sys.stderr)
        return 1
    return 0


def _baseline_missing(ref: str) -> bool:
    return ref.lower().endswith(".json") and not Path(ref).exists()


def _open_store(url: str | None) -> Any:
    from trialkit.store import Store, resolve_store_url

    return Store(resolve_store_url(url, create=False), create=False)


def _blob_url() -> str | None:
    """Where the repository's files are shown at this commit, from the runner's variables."""
    server = os.environ.get("GITHUB_SERVER_URL")
    repo = os.environ.get("GITHUB_REPOSITORY")
    sha = os.environ.get("GITHUB_SHA")
    if not (server and repo and sha):
        return None
    return f"{server.rstrip('/')}/{repo}/blob/{sha}/"


# -- comment -----------------------------------------------------------------------------------


def post_comment_command(body_path: Path, *, marker: str = COMMENT_MARKER) -> int:
    env = os.environ
    token = env.get("GITHUB_TOKEN", "")
    repo = env.get("GITHUB_REPOSITORY", "")
    number = pull_request_number(env.get("GITHUB_EVENT_PATH"))
    if number is None:
        print("not a pull request event: no comment posted")
        return 0
    if not token or not repo:
        _warn("GITHUB_TOKEN and GITHUB_REPOSITORY are needed to post the PR comment")
        return 0
    try:
        body = body_path.read_text(encoding="utf-8")
    except OSError as exc:
        _warn(f"no comment to post at {body_path}: {_reason(exc)}")
        return 0
    api = env.get("GITHUB_API_URL") or "https://api.github.com"
    try:
        url, created = upsert_comment(api, token, repo, number, body, marker=marker)
    except GitHubError as exc:
        _warn(f"could not post the PR comment: {exc}")
        return 0
    print(f"{'posted' if created else 'updated'} the PR comment: {url}")
    _set_output("comment-url", url)
    return 0


def pull_request_number(event_path: str | None) -> int | None:
    """The number of the pull request the event is about, or `None` (a push, a schedule)."""
    if not event_path:
        return None
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in ("pull_request", "issue"):
        item = event.get(key) if isinstance(event, dict) else None
        if isinstance(item, dict) and isinstance(item.get("number"), int):
            if key == "issue" and "pull_request" not in item:
                return None  # a comment on an issue, not on a pull request
            return int(item["number"])
    return None


def upsert_comment(
    api: str, token: str, repo: str, number: int, body: str, *, marker: str = COMMENT_MARKER
) -> tuple[str, bool]:
    """Edit the pull request's comment that starts with `marker`, or post one: the comment's
    URL and whether it was created."""
    import httpx

    if not body.startswith(marker):
        body = f"{marker}\n{body}"
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": "trialkit",
    }
    try:
        with httpx.Client(base_url=api.rstrip("/"), headers=headers, timeout=TIMEOUT_S) as client:
            existing = _find_comment(client, repo, number, marker)
            payload = {"body": body}
            if existing is None:
                response = client.post(f"/repos/{repo}/issues/{number}/comments", json=payload)
            else:
                response = client.patch(f"/repos/{repo}/issues/comments/{existing}", json=payload)
            data = _json(response)
    except httpx.HTTPError as exc:
        raise GitHubError(f"{type(exc).__name__}: {exc}") from None
    return str(data.get("html_url") or data.get("url") or ""), existing is None


def _find_comment(client: Any, repo: str, number: int, marker: str) -> int | None:
    for page in range(1, MAX_PAGES + 1):
        response = client.get(
            f"/repos/{repo}/issues/{number}/comments",
            params={"per_page": PAGE_SIZE, "page": page},
        )
        comments = _json(response)
        if not isinstance(comments, list):
            raise GitHubError("the list of comments is not a list")
        for comment in comments:
            body = comment.get("body") or ""
            if body.startswith(marker) or f"\n{marker}\n" in body:
                return int(comment["id"])
        if len(comments) < PAGE_SIZE:
            return None
    return None


def _json(response: Any) -> Any:
    """The response's JSON, or `GitHubError` with the status and GitHub's message (never the
    request, whose headers hold the token)."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code >= 400:
        message = data.get("message") if isinstance(data, dict) else None
        raise GitHubError(f"HTTP {response.status_code} {message or response.reason_phrase}")
    return data


# -- plumbing ----------------------------------------------------------------------------------


def _set_output(name: str, value: str) -> None:
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{name}={value}\n")


def _warn(message: str) -> None:
    from trialkit.reports.github import escape_data

    if os.environ.get("GITHUB_ACTIONS") == "true":
        print(f"::warning title=trialkit::{escape_data(message)}")
    else:
        print(f"warning: {message}", file=sys.stderr)


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


if __name__ == "__main__":
    sys.exit(main())
