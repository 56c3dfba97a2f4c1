"""`--offline` at the start of a command: this process into a loopback-only network namespace
(`trialkit.sandbox.netns`), or one line on stderr saying what `--offline` does not cover here."""

from __future__ import annotations

import contextlib
import os
from urllib.parse import parse_qs, urlsplit

import click

from trialkit.capture._loopback import is_loopback


def confine_offline(store_url: str | None, *, executor: str = "local") -> None:
    """Enter the namespace, first thing in the command (no thread may exist yet: one started
    before would stay outside, and so would the suite's own, were its module imported first).
    Where it cannot be done, or the command needs the network for itself, say so."""
    from trialkit.capture.scope import offline_coverage
    from trialkit.sandbox import netns

    reason = _needs_network(store_url, executor)
    if reason is not None:
        netns.stay_outside(reason)
    else:
        with contextlib.suppress(netns.Unavailable):  # the reason is kept, and said below
            netns.enter_loopback_only()
    confined, note = offline_coverage()
    if not confined:
        click.echo(f"--offline: {note}", err=True)


def _needs_network(store_url: str | None, executor: str) -> str | None:
    """Why this command must keep the network for itself, or `None`."""
    if executor == "ray":
        return "--executor ray reaches its cluster over the network"
    raw = store_url or os.environ.get("TRIALKIT_STORE") or ""
    if "://" not in raw or raw.startswith("sqlite"):
        return None
    try:
        parts = urlsplit(raw)
        host = parts.hostname
    except ValueError:
        return None  # the store reports its bad URL itself
    if not host or any(h.startswith("/") for h in parse_qs(parts.query).get("host", [])):
        return None  # a Unix socket
    if is_loopback(host):
        return None  # bridged
    return f"the store is on {host}, another host"
