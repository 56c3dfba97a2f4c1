"""The JUnit options `trialkit report --format junit` and `trialkit run --junit` share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from trialkit.reports.junit import CAPABILITY_FAILURES, LOCATIONS

F = TypeVar("F", bound=Callable[..., Any])


def junit_options(fn: F) -> F:
    """`--junit-capability` and `--junit-locations` (parameters `junit_capability` and
    `junit_locations`), passed to `Report.to_junit` as `capability_failures` and `locations`."""
    fn = click.option(
        "--junit-locations",
        "junit_locations",
        type=click.Choice(LOCATIONS),
        default="text",
        show_default=True,
        help="JUnit: where a testcase says which file and line define its task: a "
        "<system-out> line (valid under junit-10.xsd), or file/line attributes (read by "
        "GitLab and junitparser-based GitHub actions; the strict schema refuses them).",
    )(fn)
    return click.option(
        "--junit-capability",
        "junit_capability",
        type=click.Choice(CAPABILITY_FAILURES),
        default="skipped",
        show_default=True,
        help="JUnit: how a failed capability task appears. It does not fail the gate, so by "
        "default it is skipped (with the reason), never a red <failure>.",
    )(fn)
