"""How a run goes: one record that the command line, the pytest plugin and the Python API all
build, so an option is declared, parsed and checked in one place.

`RunSettings` holds parsed values. `RunSettings.parse` takes them as a user types them (on a
command line or in an ini file): `--trials 5` or `auto`, `--min-pass-rate 80%`, a cassette
folder and mode, and raises `SettingsError` naming the option the way the caller spells it
(`--trials` for the CLI, `--trialkit-trials` for pytest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trialkit.task import SuiteError, timeout_problem, trials_problem

if TYPE_CHECKING:
    from trialkit.models.cassette import Cassette
    from trialkit.models.retry import RetryPolicy
    from trialkit.run.adaptive import Adaptive

DEFAULT_CONCURRENCY = 10
Executor = Literal["local", "ray"]


class SettingsError(SuiteError):
    """An option's value cannot be used (exit 2 on the command line, a usage error in pytest).
    The message starts with the option's name as the caller spells it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings:
    """The options of a run. Each overrides the suite's own, like the CLI flag of its name."""

    concurrency: int = DEFAULT_CONCURRENCY
    """Trials running at once."""
    trials: int | None = None
    """Trials per task (None: the suite's and tasks' own)."""
    adaptive: Adaptive | None = None
    """Sample each task only while it is undecided (`--trials auto`); excludes `trials`."""
    timeout: float | None = None
    """Per-trial timeout in seconds (None: the suite's and tasks' own, default 60)."""
    task_ids: tuple[str, ...] = ()
    """Run only these tasks (glob patterns)."""
    tags: tuple[str, ...] = ()
    """Run only tasks with one of these tags."""
    name: str | None = None
    """A name for the run."""
    model: str | None = None
    """The model under test when neither task nor suite names one."""
    judge_model: str | None = None
    """The model judges use when they name none."""
    cassette: Cassette | None = None
    """Where model calls are recorded and replayed (None: live)."""
    retry: RetryPolicy | None = None
    """Retries of model calls on transient errors (None: the default policy)."""
    capture: bool = True
    """Capture the calls an agent makes with its own SDK clients."""
    offline: bool = False
    """Refuse every request of a trial to a host other than this machine."""
    max_cost: float | None = None
    """Stop scheduling new trials once this many dollars were spent."""
    workers: int | None = None
    """Processes (or Ray actors) that run trials."""
    executor: Executor = "local"
    """Where trials run: this machine, or a Ray cluster."""
    ray_env: tuple[str, ...] = ()
    """Names of this process's environment variables that Ray actors get too (their values
    go to the actors only: they are never logged or stored)."""
    min_pass_rate: float | None = None
    """The gate fails when the pass rate is under this."""
    fail_on_error: float = 0
    """Errored trials allowed (a count, or a fraction under 1) before the gate errors."""

    def __post_init__(self) -> None:
        if self.adaptive is not None and self.trials is not None:
            raise ValueError("give either trials or adaptive, not both")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if self.executor not in ("local", "ray"):
            raise ValueError(f"executor must be 'local' or 'ray', got {self.executor!r}")
        # SuiteError (a ValueError): the command line shows it as one line, exit 2
        if self.trials is not None and (problem := trials_problem(self.trials)) is not None:
            raise SuiteError(f"trials (the run's override): {problem}")
        if self.timeout is not None and (problem := timeout_problem(self.timeout)) is not None:
            raise SuiteError(f"timeout (the run's override): {problem}")
        if self.max_cost is not None and not self.max_cost > 0:
            raise ValueError(f"max_cost must be > 0 dollars, got {self.max_cost}")
        if self.min_pass_rate is not None and not 0 <= self.min_pass_rate <= 1:
            raise ValueError(f"min_pass_rate must be between 0 and 1, got {self.min_pass_rate}")
        if self.fail_on_error < 0:
            raise ValueError(f"fail_on_error must be >= 0, got {self.fail_on_error}")
        object.__setattr__(self, "ray_env", tuple(self.ray_env))
        if self.ray_env and self.executor != "ray":
            raise SettingsError(
                "--ray-env passes environment variables to Ray actors: it needs --executor ray"
            )
        object.__setattr__(self, "task_ids", tuple(self.task_ids))
        object.__setattr__(self, "tags", tuple(self.tags))

    @property
    def elsewhere(self) -> bool:
        """Whether trials run outside this process (worker processes or Ray actors)."""
        return self.executor == "ray" or (self.workers or 1) > 1

    def replace(self, **changes: Any) -> RunSettings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def parse(
        cls,
        *,
        trials: str | int | None = None,
        max_trials: int | None = None,
        precision: float | None = None,
        cache: str | Path | None = None,
        cache_mode: str | None = None,
        min_pass_rate: str | float | None = None,
        fail_on_error: str | float | None = None,
        no_capture: bool | None = None,
        option_names: Mapping[str, str] | None = None,
        **values: Any,
    ) -> RunSettings:
        """Settings from options as a user types them; the other `values` are taken as they are.

        The options and their names are declared in `trialkit.run.options`. `option_names` maps
        a field to where its value came from, as the user knows it (default: the CLI's
        `--trials`, `--cache`, ...; or `TRIALKIT_TRIALS`, `pyproject.toml:3: [tool.trialkit]
        trials`), for the messages of `SettingsError`.
        """
        names = _OptionNames(option_names or {})
        if no_capture is not None:
            values.setdefault("capture", not no_capture)
        count, adaptive = parse_trials(trials, max_trials, precision, names)
        return cls(
            trials=count,
            adaptive=adaptive,
            cassette=parse_cassette(cache, cache_mode, names),
            min_pass_rate=None
            if min_pass_rate is None or min_pass_rate == ""
            else parse_fraction(min_pass_rate, names("min_pass_rate")),
            fail_on_error=0 if fail_on_error is None else parse_allowance(fail_on_error, names),
            **values,
        )


class _OptionNames:
    def __init__(self, given: Mapping[str, str]) -> None:
        self.given = given

    def __call__(self, field: str) -> str:
        return self.given.get(field) or "--" + field.replace("_", "-")


def parse_trials(
    trials: str | int | None,
    max_trials: int | None,
    precision: float | None,
    names: _OptionNames | None = None,
) -> tuple[int | None, Adaptive | None]:
    """`N` or `auto` (with max_trials, precision): a count or an adaptive policy."""
    names = names or _OptionNames({})
    text = str(trials).strip() if trials is not None else None
    if text is not None and text.lower() == "auto":
        from trialkit.run.adaptive import Adaptive

        policy = Adaptive()
        return None, Adaptive(max_trials=max_trials, precision=precision or policy.precision)
    for field, given in (("max_trials", max_trials), ("precision", precision)):
        if given is not None:
            raise SettingsError(f"{names(field)} goes with {names('trials')} auto")
    if text is None or text == "":
        return None, None
    wrong = f"{names('trials')}: expected a whole number >= 1 or auto, got {trials!r}"
    try:
        count = int(text)
    except ValueError:
        raise SettingsError(wrong) from None
    if count < 1:
        raise SettingsError(wrong)
    return count, None


def parse_fraction(value: str | float, option: str) -> float:
    """`0.8` or `80%` as 0.8; anything outside [0, 1] is refused."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise SettingsError(f"{option}: expected a number like 0.8 or 80%, got {value!r}") from None
    if not 0 <= number <= 1:
        raise SettingsError(f"{option}: must be between 0 and 1 (or 0% and 100%), got {value!r}")
    return number


def parse_allowance(value: str | float, names: _OptionNames | None = None) -> float:
    """Errored trials allowed: a whole count >= 0, or a fraction between 0 and 1."""
    option = (names or _OptionNames({}))("fail_on_error")
    try:
        number = float(value)
    except ValueError:
        raise SettingsError(
            f"{option}: expected a count (e.g. 2) or a fraction (e.g. 0.05), got {value!r}"
        ) from None
    if number < 0 or (number >= 1 and not number.is_integer()):
        raise SettingsError(
            f"{option}: expected a whole count >= 0 or a fraction between 0 and 1, got {value!r}"
        )
    return number


def parse_cassette(
    cache: str | Path | None, cache_mode: str | None, names: _OptionNames | None = None
) -> Cassette | None:
    """The cassette of `cache` (a folder) in `cache_mode` (default: auto with a folder)."""
    from trialkit.models.cassette import CacheMode, Cassette

    names = names or _OptionNames({})
    if cache_mode:
        try:
            mode: CacheMode | None = CacheMode(cache_mode.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in CacheMode)
            raise SettingsError(
                f"{names('cache_mode')}: expected one of {choices}, got {cache_mode!r}"
            ) from None
    else:
        mode = CacheMode.AUTO if cache else None
    if mode is None or mode is CacheMode.LIVE:
        return None
    if not cache:
        raise SettingsError(
            f"{names('cache_mode')} {mode.value} needs {names('cache')} DIR (the cassette folder)"
        )
    if mode is CacheMode.REPLAY and not Path(cache).is_dir():
        raise SettingsError(f"{names('cache')} {cache}: no such folder to replay from")
    return Cassette(cache, mode)
