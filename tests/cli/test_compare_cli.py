"""`trialkit compare` over runs written straight to a temp store."""

# Markdown tables in the snapshots are wider than a line of code.
# ruff: noqa: E501

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from inline_snapshot import snapshot

from tests.analysis._store_runs import write_run
from trialkit.cli.main import cli
from trialkit.store import Store


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """`base` (gpt-4o) and `cand` (gpt-4o-mini), an hour later: `b` and `c` newly fail, `d`
    errors, `e` was removed and `f` added; `same` runs of another suite."""
    url = f"sqlite:///{tmp_path}/s.db"
    before = {"a": "PPP", "b": "PPP", "c": "PPP", "d": "PPP", "e": "PPP"}
    after = {"a": "PPP", "b": "PFF", "c": "FFF", "d": "PEE", "f": "PPP"}
    with Store(url) as store:
        write_run(store, "base", before, model="gpt-4o", cost_usd=0.002)
        write_run(store, "cand", after, model="gpt-4o-mini", cost_usd=0.001, hours=1)
        write_run(store, "same", before, model="gpt-4o", suite="other", hours=2)
    return url


def invoke(store_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["compare", *args, "--store", store_url])
    return result.exit_code, result.stdout, result.stderr


def test_markdown(store_url: str) -> None:
    code, out, err = invoke(store_url, "base", "cand", "--format", "md")

    assert (code, err) == (0, "")
    assert out == snapshot("""\
## trialkit compare · suite suite

| Run | Id | Model | Started | Status | Tasks | Trials | Pass rate (95% CI) | Mean score | Cost/trial | p50 |
|---|---|---|---|---|---:|---:|---:|---:|---:|---:|
| A | base | gpt-4o | 2025-06-01 09:00 | completed | 5 | 15 | 100.0% (79.6%–100.0%) | 1.000 | \\$0.0020 | 1.00 s |
| B | cand | gpt-4o-mini | 2025-06-01 10:00 | completed | 5 | 15 | 66.7% (8.1%–100.0%) | 0.615 | \\$0.0010 | 1.00 s |

### B against A

**❌ B is worse than A on these tasks: 1 of B's trials passed where 3.5 were expected if nothing changed (exact stratified test over 2 tasks, p = 0.02): significant at 95%. Not compared: f (not in A, pass 3/3 in B), e (pass 3/3 in A, not in B). Verdicts: 2 new failures (b, c); no single task changed significantly on its own (Fisher's exact test, Holm-adjusted over 2 tasks).**

For tasks like these: the mean task pass rate goes 100.0% → 58.3%, −41.7 pts over 4 tasks (95% CI −100.0 to +37.9 pts; sign-flip test p = 0.5): too few tasks to tell: with 4 tasks no test over tasks can reach p \\< 0.05 (the smallest possible is 2/2^4 = 0.125); it takes at least 6 tasks that change.

| Figure | Value |
|---|---|
| Tasks in both runs | 4 (4 with decided trials in both) |
| New failures in B | 2: b, c |
| Fixed in B | none |
| Errored in either run | 1: d |
| Not compared | 2: f (not in A, pass 3/3 in B), e (pass 3/3 in A, not in B) |
| These tasks: exact stratified test (the gate) | p = 0.02 (B passed 1 trial, 3.5 expected, over 2 tasks that can vary; CMH χ² = 7.35, p = 0.0067) |
| These tasks: changed on their own | none significant alone (Fisher's exact test, Holm-adjusted over 2 tasks) |
| These tasks: smallest detectable change | 53.2 pts on every task (80% power) |
| Pass rate A → B (mean over tasks in both) | 100.0% → 58.3% |
| Tasks like these: difference B − A | −41.7 pts (95% CI −100.0 to +37.9 pts; t interval over 4 tasks) |
| Tasks like these: sign-flip test over tasks | p = 0.5 (exact; 2 of 4 tasks changed; smallest possible p = 0.5): too few tasks to tell |
| Tasks like these: smallest detectable change | none: too few tasks for any test over tasks to reach 0.05 |
| Exact McNemar test (task verdicts) | p = 0.5 (2 new failures, 0 fixed, of 3 tasks decided in both) |
| Mean score Δ (whole runs) | −0.385 |
| Cost per trial Δ (whole runs) | −\\$0.0010 |
| Latency p50 Δ (whole runs) | 0.00 s |

### Tasks

| Task | A · gpt-4o | B · gpt-4o-mini | Δ rate | Δ score | Δ cost/trial | Δ p50 | Change |
|---|---:|---:|---:|---:|---:|---:|---|
| a | ✅ 3/3 100.0% | ✅ 3/3 100.0% | 0.0 pts | 0.000 | −\\$0.0010 | 0.00 s |  |
| b | ✅ 3/3 100.0% | ❌ 1/3 33.3% | −66.7 pts | −0.667 | −\\$0.0010 | 0.00 s | **new failure** |
| c | ✅ 3/3 100.0% | ❌ 0/3 0.0% | −100.0 pts | −1.000 | −\\$0.0010 | 0.00 s | **new failure** |
| d | ✅ 3/3 100.0% | ⚠️ 1/1 100.0% | 0.0 pts | 0.000 | −\\$0.0010 | 0.00 s | error |
| e | ✅ 3/3 100.0% | — | n/a | n/a | n/a | n/a | removed |
| f | — | ✅ 3/3 100.0% | n/a | n/a | n/a | n/a | added |
""")


def test_table_names_the_models_and_ends_with_the_conclusion(store_url: str) -> None:
    code, out, _ = invoke(store_url, "base", "cand")

    flat = " ".join(out.split())
    assert code == 0  # without --fail-on-regression, a report only
    assert "A · gpt-4o" in out
    assert "B · gpt-4o-mini" in out
    assert "new failure" in out
    assert "B is worse than A on these tasks" in flat
    assert "For tasks like these:" in flat
    assert flat.endswith("it takes at least 6 tasks that change.")


def test_json(store_url: str) -> None:
    code, out, _ = invoke(store_url, "base", "cand", "--format", "json")

    data = json.loads(out)
    assert code == 0
    assert data["schema_version"] == 2
    assert [r["model"] for r in data["runs"]] == ["gpt-4o", "gpt-4o-mini"]
    pair = data["pairs"][0]
    assert (pair["new_failures"], pair["error_tasks"]) == (["b", "c"], ["d"])
    assert (pair["added"], pair["removed"]) == (["f"], ["e"])
    assert pair["mcnemar_p_value"] == 0.5
    assert (pair["outcome"], pair["suite_outcome"]) == ("worse", "too_few_tasks")
    assert [t["id"] for t in pair["left_out"]] == ["f", "e"]


def test_fail_on_regression_exits_1_only_when_significantly_worse(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    with Store(url) as store:
        write_run(store, "good", {f"t{i}": "PPP" for i in range(20)})
        write_run(store, "bad", {f"t{i}": ("FFF" if i < 8 else "PPP") for i in range(20)}, hours=1)
        write_run(store, "also-good", {f"t{i}": "PPP" for i in range(20)}, hours=2)

    code, out, err = invoke(url, "good", "bad", "--fail-on-regression")
    assert code == 1
    assert "significant at 95%." in out
    assert err == REGRESSION

    assert invoke(url, "good", "bad")[0] == 0  # without the flag, a report only
    assert invoke(url, "good", "also-good", "--fail-on-regression")[0] == 0
    assert invoke(url, "bad", "good", "--fail-on-regression")[0] == 0  # better, not worse


def regression_store(tmp_path: Path, tasks: int, failing: int) -> str:
    """`good` passes every task; `bad` fails the first `failing` of them."""
    url = f"sqlite:///{tmp_path}/few.db"
    with Store(url) as store:
        write_run(store, "good", {f"t{i:02d}": "PPP" for i in range(tasks)})
        after = {f"t{i:02d}": ("FFF" if i < failing else "PPP") for i in range(tasks)}
        write_run(store, "bad", after, hours=1)
    return url


REGRESSION = (
    "regression: run B is significantly worse than run A on these tasks (exact stratified test)\n"
)


@pytest.mark.parametrize(
    ("tasks", "failing", "code"),
    [(1, 1, 0), (3, 3, 1), (5, 5, 1), (40, 5, 1), (6, 6, 1), (200, 30, 1)],
)
def test_fail_on_regression_counts_trials_within_tasks(
    tmp_path: Path, tasks: int, failing: int, code: int
) -> None:
    """3/3 → 0/3 on one task is Fisher's p = 0.1: no regression called. On 3 or more tasks
    the trials show it (p <= 2/20^3), though 5 or fewer tasks cannot answer for tasks like
    these."""
    url = regression_store(tmp_path, tasks, failing)

    exit_code, out, err = invoke(url, "good", "bad", "--fail-on-regression", "--format", "json")

    pair = json.loads(out)["pairs"][0]
    assert pair["trial_test"]["p_value"] == pytest.approx(2 * (1 / 20) ** failing)
    assert exit_code == code
    assert (pair["outcome"] == "worse") is (code == 1)
    assert err == (REGRESSION if code else "")
    assert (pair["suite_outcome"] == "too_few_tasks") is (failing < 6)


def test_different_suites_are_refused_unless_allowed(store_url: str) -> None:
    code, out, err = invoke(store_url, "base", "same")

    assert (code, out) == (2, "")
    assert err == (
        "error: run B (same) ran suite 'other', but run A (base) ran 'suite': compare runs of "
        "one suite, or allow different suites (--allow-different-suites) to pair tasks by id\n"
    )
    assert invoke(store_url, "base", "same", "--allow-different-suites")[0] == 0


def test_more_runs_make_one_table_with_a_column_per_run(store_url: str) -> None:
    code, out, _ = invoke(
        store_url, "base", "cand", "same", "--allow-different-suites", "--format", "md"
    )

    assert code == 0
    assert "| Task | A · gpt-4o | B · gpt-4o-mini | C · gpt-4o |" in out
    assert "| b | ✅ 3/3 100.0% | ❌ 1/3 33.3% ↓ | ✅ 3/3 100.0% |" in out
    assert "### B against A" in out
    assert "### C against A" in out
    assert "Δ rate" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["base"], "error: compare needs at least two runs: trialkit compare RUN_A RUN_B\n"),
        (
            ["base", "nope"],
            "error: no run matches 'nope' (by id, id prefix or name) in the store {url}; "
            "`trialkit runs` lists the runs\n",
        ),
    ],
)
def test_bad_runs_are_one_line_errors(store_url: str, args: list[str], message: str) -> None:
    code, out, err = invoke(store_url, *args)

    assert (code, out) == (2, "")
    assert err == message.format(url=store_url)


def test_a_bad_confidence_is_a_usage_error(store_url: str) -> None:
    code, _, err = invoke(store_url, "base", "cand", "--confidence", "1")

    assert code == 2
    assert "--confidence" in err


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """`import MODULE` fails from now on, as if it were not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_without_scipy_compare_says_the_same(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_scipy = invoke(store_url, "base", "cand", "--format", "md")
    without(monkeypatch, "scipy", "scipy.stats")

    assert invoke(store_url, "base", "cand", "--format", "md") == with_scipy


def test_without_numpy_or_scipy_the_gate_is_the_same(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = invoke(store_url, "base", "cand", "--fail-on-regression", "--format", "md")
    without(monkeypatch, "numpy", "scipy", "scipy.stats")

    assert invoke(store_url, "base", "cand", "--fail-on-regression", "--format", "md") == gated
    assert gated[0] == 1


def test_output_file(store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "compare.json"

    code, out, _ = invoke(store_url, "base", "cand", "--format", "json", "-o", str(target))

    assert (code, out) == (0, "")
    assert json.loads(target.read_text(encoding="utf-8"))["runs"][1]["id"] == "cand"


def test_help_lists_the_command(store_url: str) -> None:
    out = CliRunner().invoke(cli, ["--help"]).stdout

    assert "compare " in out
    assert "health " in out
