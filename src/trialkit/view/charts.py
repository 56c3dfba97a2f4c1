"""Line charts of a suite's runs, laid out on the server for `templates/_chart.html` to draw
as inline SVG: coordinates, axis ticks and each point's tooltip and link. Colours are CSS
classes (view.css), so both themes apply and the Content-Security-Policy holds."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trialkit.store.browse import TrendPoint
from trialkit.view import pages

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 12, 28
"""Margins around the plot, for the axis labels."""

Value = Callable[[TrendPoint], float | None]
Format = Callable[[float | None], str]


@dataclass
class Dot:
    x: float
    y: float
    href: str
    title: str


@dataclass
class Series:
    label: str
    css: str
    """The class that colours it (`series-1`, …)."""
    lines: list[str] = field(default_factory=list)
    """`points` of each polyline: runs in a row that have a value."""
    dots: list[Dot] = field(default_factory=list)


@dataclass
class Chart:
    title: str
    series: list[Series]
    bands: list[str]
    """`points` of each polygon of the interval band."""
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str]]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        return not any(s.dots for s in self.series)


def x_positions(n: int) -> list[float]:
    """Where each of `n` runs goes, left to right; one run in the middle."""
    span = WIDTH - RIGHT - LEFT
    if n == 1:
        return [LEFT + span / 2]
    return [LEFT + span * i / (n - 1) for i in range(n)]


def nice_ceiling(largest: float) -> float:
    """The top of an axis for values up to `largest`: a little above it, 1, 2, 4, 6 or 8
    times a power of ten, so the half-way tick is a round number too (1 for none above 0)."""
    if largest <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(largest * 1.05))
    for step in (1, 2, 4, 6, 8, 10):
        if step * power >= largest * 1.05:
            return round(step * power, 12)
    return 10.0 * power


def run_label(point: TrendPoint) -> str:
    name = f" ({point.name})" if point.name else ""
    return f"run {point.run_id}{name}, {pages.when(point.started_at)}"


def chart(
    title: str,
    points: Sequence[TrendPoint],
    series: Sequence[tuple[str, Value]],
    fmt: Format,
    *,
    top: float | None = None,
    band: Callable[[TrendPoint], tuple[float, float] | None] | None = None,
    named: Callable[[str, TrendPoint], str] | None = None,
) -> Chart:
    """A chart of `series` (label, value) over `points`, from 0 to `top` (default: a little
    over the largest value); `band` draws an interval behind the first series; `named`
    gives a series its name in one point's tooltip (default: its label)."""
    xs = x_positions(len(points))
    values = [[value(p) for p in points] for _, value in series]
    intervals: list[tuple[float, float] | None] = [band(p) if band else None for p in points]
    seen = [v for row in values for v in row if v is not None]
    seen += [hi for ci in intervals if ci for hi in ci[1:]]
    ceiling = top if top is not None else nice_ceiling(max(seen, default=0.0))

    def y(value: float) -> float:
        share = min(max(value / ceiling, 0.0), 1.0)
        return round(HEIGHT - BOTTOM - share * (HEIGHT - BOTTOM - TOP), 1)

    drawn = []
    for number, ((label, _), row) in enumerate(zip(series, values, strict=True), start=1):
        one = Series(label=label, css=f"series-{number}")
        run: list[str] = []
        for point, x, value in zip(points, xs, row, strict=True):
            if value is None:
                one.lines += [" ".join(run)] if len(run) > 1 else []
                run = []
                continue
            run.append(f"{x:.1f},{y(value)}")
            one.dots.append(
                Dot(
                    x=round(x, 1),
                    y=y(value),
                    href=pages.run_url(point.run_id),
                    title=f"{named(label, point) if named else label}: {fmt(value)} · "
                    f"{run_label(point)}",
                )
            )
        one.lines += [" ".join(run)] if len(run) > 1 else []
        drawn.append(one)
    ticks = [(y(ceiling * share), fmt(ceiling * share)) for share in (0.0, 0.5, 1.0)]
    return Chart(
        title=title,
        series=drawn,
        bands=_bands(xs, intervals, y),
        y_ticks=ticks,
        x_ticks=_x_ticks(points, xs),
    )


def _bands(
    xs: list[float],
    intervals: list[tuple[float, float] | None],
    y: Callable[[float], float],
) -> list[str]:
    """A polygon per stretch of runs in a row with an interval: along the highs, back along
    the lows; a lone run's interval is a thin bar."""
    found: list[str] = []
    stretch: list[tuple[float, tuple[float, float]]] = []
    for x, ci in [*zip(xs, intervals, strict=True), (0.0, None)]:
        if ci is not None:
            stretch.append((x, ci))
            continue
        if len(stretch) == 1:
            (x0, (lo, hi)) = stretch[0]
            stretch = [(x0 - 3, (lo, hi)), (x0 + 3, (lo, hi))]
        if stretch:
            upper = [f"{x1:.1f},{y(hi)}" for x1, (_, hi) in stretch]
            lower = [f"{x1:.1f},{y(lo)}" for x1, (lo, _) in reversed(stretch)]
            found.append(" ".join(upper + lower))
        stretch = []
    return found


def _x_ticks(points: Sequence[TrendPoint], xs: list[float]) -> list[tuple[float, str]]:
    """The first and the last run's day (one tick for one run)."""
    if not points:
        return []
    chosen = [0] if len(points) == 1 else [0, len(points) - 1]
    return [(round(xs[i], 1), points[i].started_at.date().isoformat()) for i in chosen]


def trend_charts(points: Sequence[TrendPoint]) -> list[Chart]:
    """The charts of a suite's trend page: pass rate (with its interval) and pass^k, errors,
    cost and latency, each over the runs, oldest first."""
    from trialkit.reports import _format as f

    k = max((p.k for p in points if p.k), default=None)
    pass_hat = f"pass^{k}" if k else "pass^k"
    return [
        chart(
            "Pass rate and " + pass_hat,
            points,
            [("pass rate", lambda p: p.pass_rate), (pass_hat, lambda p: p.pass_hat_k)],
            f.percent,
            top=1.0,
            band=lambda p: p.pass_rate_ci,
            named=lambda label, p: f"pass^{p.k}" if label == pass_hat and p.k else label,
        ),
        chart("Errors", points, [("errored trials", lambda p: float(p.errors))], _count),
        chart("Cost", points, [("cost", lambda p: p.cost_usd)], f.cost),
        chart(
            "Latency",
            points,
            [("p50", lambda p: p.latency_p50_s), ("p95", lambda p: p.latency_p95_s)],
            f.seconds,
        ),
    ]


def _count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}" if value == int(value) else f"{value:.1f}"
