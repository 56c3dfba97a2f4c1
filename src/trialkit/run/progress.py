"""Progress display for a run: a rich bar on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
import time
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import (
    Progress as RichBar,
)

from trialkit.score import Verdict
from trialkit.trial import Trial


class Progress:
    """Receives the run's events; the base class shows nothing."""

    def start(self, total: int) -> None:
        self.total = total
        self.counts = {v: 0 for v in Verdict}
        self.cost: float | None = None

    def advance(self, trial: Trial) -> None:
        self.counts[trial.verdict] += 1
        if trial.cost_usd is not None:
            self.cost = (self.cost or 0.0) + trial.cost_usd

    def stop(self) -> None:
        return None

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def tally(self) -> str:
        c = self.counts
        text = f"pass {c[Verdict.PASS]}  fail {c[Verdict.FAIL]}  error {c[Verdict.ERROR]}"
        if c[Verdict.UNKNOWN]:
            text += f"  unknown {c[Verdict.UNKNOWN]}"
        if self.cost is not None:
            text += f"  ${self.cost:.4f}"
        return text


class BarProgress(Progress):
    """A rich progress bar with pass/fail/error counts, cost so far and ETA."""

    def __init__(self, console: Console, label: str = "trials") -> None:
        self.console = console
        self.label = label
        self.bar = RichBar(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]✓ {task.fields[passed]}[/] [red]✗ {task.fields[failed]}[/] "
                "[yellow]! {task.fields[errors]}[/]{task.fields[extra]}"
            ),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.task_id: TaskID | None = None

    def start(self, total: int) -> None:
        super().start(total)
        self.bar.start()
        self.task_id = self.bar.add_task(
            self.label, total=total, passed=0, failed=0, errors=0, extra=""
        )

    def advance(self, trial: Trial) -> None:
        super().advance(trial)
        assert self.task_id is not None
        c = self.counts
        extra = f" [dim]? {c[Verdict.UNKNOWN]}[/]" if c[Verdict.UNKNOWN] else ""
        if self.cost is not None:
            extra += f" ${self.cost:.4f}"
        self.bar.update(
            self.task_id,
            advance=1,
            passed=c[Verdict.PASS],
            failed=c[Verdict.FAIL],
            errors=c[Verdict.ERROR],
            extra=extra,
        )

    def stop(self) -> None:
        self.bar.stop()


class LineProgress(Progress):
    """Plain lines for logs and CI: at most one every `interval` seconds, and a last one."""

    def __init__(self, stream: IO[str] | None = None, interval: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self._last = 0.0

    def start(self, total: int) -> None:
        super().start(total)
        self._started = time.monotonic()
        self._last = self._started
        print(f"running {total} trials", file=self.stream, flush=True)

    def advance(self, trial: Trial) -> None:
        super().advance(trial)
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._line()

    def stop(self) -> None:
        self._line()

    def _line(self) -> None:
        elapsed = time.monotonic() - self._started
        print(
            f"[{self.done}/{self.total}] {self.tally()}  {elapsed:.1f}s",
            file=self.stream,
            flush=True,
        )


def progress_for(console: Console) -> Progress:
    """A bar when `console` is an interactive terminal, plain lines otherwise."""
    if console.is_terminal and not console.is_dumb_terminal:
        return BarProgress(console)
    return LineProgress(console.file)
