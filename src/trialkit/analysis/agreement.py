"""Agreement between raters (judges, humans) on the same trials: Krippendorff's alpha.

Reliability data is a table of raters × units (graders × trials); a cell is missing when that
rater gave no value for that unit. From it, the coincidence matrix o: in every unit u holding
m_u ≥ 2 values, each ordered pair of values (c, k) given by two different raters adds
1 / (m_u − 1) to o[c, k]. With n_c = Σ_k o[c, k], the count of pairable values of c, and
n = Σ_c n_c:

    alpha = 1 − (n − 1) · Σ_c Σ_k o[c, k] δ²(c, k) / Σ_c Σ_k n_c n_k δ²(c, k)

δ²(c, k) is 1 when c ≠ k and 0 otherwise for nominal data (verdicts), and (c − k)² for
interval data (scores). A unit with fewer than 2 values pairs nothing and is left out. Alpha is
1 for perfect agreement, 0 for agreement at chance, and undefined when no unit holds 2 values
or every pairable value is the same (nothing could have been disagreed on).

The sums are computed unit by unit, without building o, so many distinct scores cost no
memory: for nominal data Σ o δ² = n − Σ_c o[c, c] and Σ n_c n_k δ² = n² − Σ_c n_c²; for interval
data Σ o δ² sums the squared differences of the pairs within each unit, and Σ n_c n_k δ² is
2n Σ (x − x̄)² over all pairable values. `coincidence_matrix` builds o itself, to look at.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from trialkit._record import Record
from trialkit.analysis._deps import require_stats
from trialkit.labels import HUMAN, Label
from trialkit.score import Assertion, Score, Verdict
from trialkit.trial import Trial

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Level = Literal["nominal", "interval"]


class Agreement(Record):
    """Krippendorff's alpha of some raters on some units."""

    level: Level
    alpha: float | None
    reason: str | None = None
    """Why `alpha` is undefined."""
    raters: list[str]
    units: int
    """Units holding at least 2 values: the ones alpha is computed on."""
    values: int
    """Values in those units (n, the pairable values)."""
    units_left_out: int
    """Units with fewer than 2 values (pairing nothing)."""


def krippendorff_alpha(
    data: Sequence[Sequence[object]],
    *,
    level: Level = "nominal",
    raters: Sequence[str] | None = None,
) -> Agreement:
    """Krippendorff's alpha of `data`: one row per rater, one column per unit, `None` (or NaN)
    for a missing value. Nominal values may be any hashable; interval values are numbers."""
    require_stats("Krippendorff's alpha")
    names = list(raters) if raters is not None else [f"rater {i + 1}" for i in range(len(data))]
    if len(names) != len(data):
        raise ValueError(f"{len(names)} rater names for {len(data)} rows of data")
    units, rows = _shape(data)
    if level == "nominal":
        sums = _nominal_sums(rows, units)
    elif level == "interval":
        sums = _interval_sums(rows, units)
    else:
        raise ValueError(f"level must be 'nominal' or 'interval', not {level!r}")
    alpha, reason = None, None
    if sums.values == 0:
        reason = "no unit has values from 2 raters"
    elif sums.distinct < 2:
        reason = "every value is the same, so no disagreement was possible"
    else:
        alpha = 1.0 - (sums.values - 1) * sums.observed / sums.expected
    return Agreement(
        level=level,
        alpha=alpha,
        reason=reason,
        raters=names,
        units=sums.units,
        values=sums.values,
        units_left_out=units - sums.units,
    )


def coincidence_matrix(
    data: Sequence[Sequence[object]],
) -> tuple[list[Hashable], NDArray[np.float64]]:
    """The distinct values (sorted when they can be) and the coincidence matrix o over them."""
    require_stats("a coincidence matrix")
    import numpy as np

    units, rows = _shape(data)
    codes, values = _codes(rows, units)
    matrix = np.zeros((len(values), len(values)))
    for column in codes.T:
        found = column[column >= 0]
        if len(found) < 2:
            continue
        counts = np.bincount(found, minlength=len(values)).astype(float)
        matrix += (np.outer(counts, counts) - np.diag(counts)) / (len(found) - 1)
    return values, matrix


def judge_agreement(
    trials: Iterable[Trial],
    graders: Sequence[str],
    *,
    labels: Iterable[Label] = (),
    level: Level = "nominal",
) -> Agreement:
    """Krippendorff's alpha of graders (by score name) and human labels on the same trials.

    Each grader is a rater, and so is each `grader` field of the labels (`human`, or
    `human:NAME` for labels for grader NAME). A grader is found among a trial's scores, or
    among the parts of a combined score (the judges of a `majority` or `mean`). Nominal
    compares pass/fail verdicts; interval compares scores (a pass or fail without a value
    counts as 1.0 or 0.0). Errors and
    `unknown` are missing values. A label is matched to a trial by run, task and trial index;
    one that names no run matches that task and index in any run.
    """
    by_label: dict[tuple[str | None, str, int], dict[str, object]] = {}
    label_raters: list[str] = []
    for label in labels:
        rater = HUMAN if label.grader == HUMAN else f"{HUMAN}:{label.grader}"
        if rater not in label_raters:
            label_raters.append(rater)
        by_label.setdefault((label.run_id, label.task_id, label.trial), {})[rater] = _label_value(
            label, level
        )
    raters = [*graders, *label_raters]
    columns: list[list[object]] = []
    for trial in trials:
        scores = ratings_of(trial)
        cells = [_score_value(scores.get(name), level) for name in graders]
        from_labels = {
            **by_label.get((None, trial.task_id, trial.index), {}),
            **by_label.get((trial.run_id, trial.task_id, trial.index), {}),
        }
        columns.append([*cells, *(from_labels.get(rater) for rater in label_raters)])
    data = [[column[i] for column in columns] for i in range(len(raters))]
    return krippendorff_alpha(data, level=level, raters=raters)


def _shape(data: Sequence[Sequence[object]]) -> tuple[int, list[Sequence[object]]]:
    rows = list(data)
    units = len(rows[0]) if rows else 0
    for i, row in enumerate(rows):
        if len(row) != units:
            raise ValueError(f"row {i} has {len(row)} values, row 0 has {units}: one per unit")
    return units, rows


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _codes(rows: Sequence[Sequence[object]], units: int) -> tuple[NDArray[np.intp], list[Hashable]]:
    """Each value's index in the sorted distinct values, -1 for a missing one."""
    import numpy as np

    distinct: set[Hashable] = set()
    for row in rows:
        distinct.update(v for v in row if not _missing(v))
    try:
        values: list[Hashable] = sorted(distinct)  # type: ignore[type-var]
    except TypeError:
        values = sorted(distinct, key=repr)
    index = {v: i for i, v in enumerate(values)}
    codes = np.full((len(rows), units), -1, dtype=np.intp)
    for r, row in enumerate(rows):
        for u, value in enumerate(row):
            if not _missing(value):
                codes[r, u] = index[value]
    return codes, values


def _numbers(rows: Sequence[Sequence[object]], units: int) -> NDArray[np.float64]:
    import numpy as np

    numbers = np.full((len(rows), units), np.nan)
    for r, row in enumerate(rows):
        for u, value in enumerate(row):
            if _missing(value):
                continue
            if not isinstance(value, int | float):
                raise ValueError(f"interval data must be numbers, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"interval data must be finite numbers, got {value!r}")
            numbers[r, u] = float(value)
    return numbers


@dataclass(frozen=True)
class _Sums:
    """What alpha is made of, over the units holding at least 2 values."""

    units: int
    values: int
    """n: the values in those units."""
    distinct: int
    """How many different values they hold."""
    observed: float
    """Σ_c Σ_k o[c, k] δ²(c, k)."""
    expected: float
    """Σ_c Σ_k n_c n_k δ²(c, k)."""


def _nominal_sums(rows: Sequence[Sequence[object]], units: int) -> _Sums:
    """The sums from the count of each value in each unit: Σ o δ² = n − Σ_c o[c, c], where
    o[c, c] adds n_uc (n_uc − 1) / (m_u − 1) for each unit, and Σ n_c n_k δ² = n² − Σ_c n_c²."""
    import numpy as np

    codes, _ = _codes(rows, units)
    per_unit = (codes >= 0).sum(axis=0)
    pairable = per_unit >= 2
    cells = codes[:, pairable].T
    present = cells >= 0
    unit, code = np.nonzero(present)[0], cells[present]
    if code.size == 0:
        return _Sums(0, 0, 0, 0.0, 0.0)
    width = int(code.max()) + 1
    pair, count = np.unique(unit * width + code, return_counts=True)
    m = per_unit[pairable][pair // width]
    diagonal = float(np.sum(count * (count - 1) / (m - 1)))
    totals = np.bincount(code, minlength=width).astype(float)
    n = float(totals.sum())
    return _Sums(
        units=int(pairable.sum()),
        values=int(n),
        distinct=int(np.count_nonzero(totals)),
        observed=n - diagonal,
        expected=n * n - float(np.sum(totals**2)),
    )


def _interval_sums(rows: Sequence[Sequence[object]], units: int) -> _Sums:
    """The sums from squared differences: of each pair of values within a unit (exactly 0
    when they agree), and of all values from their mean (Σ_{i,j} (x_i − x_j)² = 2n Σ (x − x̄)²)."""
    import numpy as np

    numbers = _numbers(rows, units)
    per_unit = (~np.isnan(numbers)).sum(axis=0)
    pairable = per_unit >= 2
    kept = numbers[:, pairable]
    pair_sums = np.zeros(kept.shape[1])
    for i in range(len(kept)):
        for j in range(i + 1, len(kept)):
            pair_sums += np.nan_to_num((kept[i] - kept[j]) ** 2)
    values = kept[~np.isnan(kept)]
    if values.size == 0:
        return _Sums(0, 0, 0, 0.0, 0.0)
    return _Sums(
        units=int(pairable.sum()),
        values=int(values.size),
        distinct=int(np.unique(values).size),
        observed=float(np.sum(2 * pair_sums / (per_unit[pairable] - 1))),
        expected=float(2 * values.size * np.sum((values - values.mean()) ** 2)),
    )


def ratings_of(trial: Trial) -> dict[str, Score | Assertion]:
    """What each grader said of `trial`: its scores, then the parts of combined scores (a
    score's own name wins over a part with the same name). Pending scores said nothing."""
    found: dict[str, Score | Assertion] = {}
    for score in trial.scores:
        for part in score.assertions:
            found.setdefault(part.name, part)
    for score in trial.scores:
        if not score.pending:
            found[score.name] = score
    return found


def default_raters(trials: Iterable[Trial]) -> list[str]:
    """The judges to compare when none are named: the judges of the first `majority` or `mean`
    holding at least two, else every score carrying a judge model. A judge is recognised by
    what it recorded, not by its name: a score with a `judge_model`, or a part that a
    `majority` or `mean` lists under `judges` in its metadata."""
    from trialkit.analysis.calibration import JUDGE_MODEL_KEY

    singles: list[str] = []
    for trial in trials:
        for score in trial.scores:
            parts = _judge_parts(score)
            if len(parts) >= 2:
                return parts
            if JUDGE_MODEL_KEY in score.metadata and score.name not in singles:
                singles.append(score.name)
    return singles


def _judge_parts(score: Score) -> list[str]:
    """The parts of a combined score that are judges."""
    from trialkit.graders.judge import JUDGES_KEY

    named = score.metadata.get(JUDGES_KEY)
    if isinstance(named, list) and all(isinstance(n, str) for n in named):
        present = {a.name for a in score.assertions}
        return [n for n in named if n in present]
    # Stored before combined scores named their judges: a judge's default name tells it.
    return [a.name for a in score.assertions if a.name.startswith("judge(")]


def _score_value(score: Score | Assertion | None, level: Level) -> object:
    if score is None or score.verdict not in (Verdict.PASS, Verdict.FAIL):
        return None
    if level == "nominal":
        return score.verdict.value
    if score.value is not None:
        return score.value
    return 1.0 if score.verdict is Verdict.PASS else 0.0


def _label_value(label: Label, level: Level) -> object:
    if label.verdict == "unknown":
        return None
    return label.verdict if level == "nominal" else label.score
