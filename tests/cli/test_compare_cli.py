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
| B | cand | gpt-4o-mini | 2025-06-01 10:00 | completed | 5 | 15 | 61.5% (35.5%–82.3%) | 0.615 | \\$0.0010 | 1.00 s |

### B against A

**B is worse than A on 2 tasks (2 new failures, 0 fixed); the pass rate changes by −50.0 pts (95% CI −90.0 to 0.0 pts): not significant at 95%.**

| Figure | Value |
|---|---|
| Tasks in both runs | 4 (1 added in B, 1 removed: not compared) |
| New failures in B | 2: b, c |
| Fixed in B | none |
| Errored in either run (not tested) | 1: d |
| Added in B | 1: f |
| Removed in B | 1: e |
| Pass rate A → B (tasks in both) | 100.0% → 50.0% |
| Difference B − A | −50.0 pts (95% CI −90.0 to 0.0 pts; paired bootstrap over 4 tasks, 10,000 resamples, seed 0) |
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
| d | ✅ 3/3 100.0% | ⚠️ 1/1 100.0% | 0.0 pts | 0.000 | −\\$0.0010 | 0.00 s | error (not tested) |
| e | ✅ 3/3 100.0% | — | n/a | n/a | n/a | n/a | removed |
| f | — | ✅ 3/3 100.0% | n/a | n/a | n/a | n/a | added |
""")


def test_table_names_the_models_and_ends_with_the_conclusion(store_url: str) -> None:
    code, out, _ = invoke(store_url, "base", "cand")

    assert code == 0
    assert "A · gpt-4o" in out
    assert "B · gpt-4o-mini" in out
    assert "new failure" in out
    assert out.rstrip().splitlines()[-1].endswith("not significant at 95%.")


def test_json(store_url: str) -> None:
    code, out, _ = invoke(store_url, "base", "cand", "--format", "json")

    data = json.loads(out)
    assert code == 0
    assert data["schema_version"] == 1
    assert [r["model"] for r in data["runs"]] == ["gpt-4o", "gpt-4o-mini"]
    pair = data["pairs"][0]
    assert (pair["new_failures"], pair["error_tasks"]) == (["b", "c"], ["d"])
    assert (pair["added"], pair["removed"]) == (["f"], ["e"])
    assert pair["mcnemar_p_value"] == 0.5
    assert pair["outcome"] == "no_difference"


def test_fail_on_regression_exits_1_only_when_significantly_worse(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    with Store(url) as store:
        write_run(store, "good", {f"t{i}": "PPP" for i in range(20)})
        write_run(store, "bad", {f"t{i}": ("FFF" if i < 8 else "PPP") for i in range(20)}, hours=1)
        write_run(store, "also-good", {f"t{i}": "PPP" for i in range(20)}, hours=2)

    code, out, err = invoke(url, "good", "bad", "--fail-on-regression")
    assert code == 1
    assert "significant at 95%." in out
    assert err == "regression: run B is significantly worse than run A\n"

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


@pytest.mark.parametrize(("tasks", "failing"), [(1, 1), (3, 3), (5, 5), (40, 5)])
def test_fail_on_regression_cannot_tell_from_too_few_changed_tasks(
    tmp_path: Path, tasks: int, failing: int
) -> None:
    """The bootstrap's interval lies below 0 (zero wide when every task fails), but fewer than
    6 tasks changed: the exact McNemar test cannot reach p < 0.05, so no regression is called."""
    url = regression_store(tmp_path, tasks, failing)

    code, out, err = invoke(url, "good", "bad", "--fail-on-regression")

    tasks_changed = f"only {failing} task{'s' if failing > 1 else ''} changed verdict"
    why = f"{tasks_changed}, too few to tell at 95% (it takes at least 6)"
    assert code == 0
    assert " ".join(out.split()).endswith(f", but {why}.")  # the conclusion, maybe wrapped
    assert err == f"cannot tell whether run B is worse than run A: {why}\n"


@pytest.mark.parametrize(("tasks", "failing"), [(6, 6), (200, 30)])
def test_fail_on_regression_exits_1_when_both_tests_agree(
    tmp_path: Path, tasks: int, failing: int
) -> None:
    url = regression_store(tmp_path, tasks, failing)

    code, out, err = invoke(url, "good", "bad", "--fail-on-regression", "--format", "json")

    pair = json.loads(out)["pairs"][0]
    assert (pair["outcome"], pair["mcnemar_p_value"]) == ("worse", 2 / 2**failing)
    assert pair["difference_ci"][1] < 0
    assert code == 1
    assert err == "regression: run B is significantly worse than run A\n"


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


def test_without_numpy_the_interval_names_the_extra(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    without(monkeypatch, "numpy", "scipy", "scipy.stats")

    code, out, err = invoke(store_url, "base", "cand", "--format", "md")

    assert (code, err) == (0, "")
    assert (
        "| Difference B − A | −50.0 pts (no interval: the paired bootstrap needs numpy: "
        "pip install 'trialkit\\[stats\\]') |"  # Markdown escapes the brackets
    ) in out
    assert "| Exact McNemar test (task verdicts) | p = 0.5 " in out

    code, out, err = invoke(store_url, "base", "cand", "--fail-on-regression")

    assert (code, out) == (2, "")
    assert err == (
        "error: --fail-on-regression needs the interval of the difference, and the paired "
        "bootstrap needs numpy: pip install 'trialkit[stats]'\n"
    )


def test_output_file(store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "compare.json"

    code, out, _ = invoke(store_url, "base", "cand", "--format", "json", "-o", str(target))

    assert (code, out) == (0, "")
    assert json.loads(target.read_text(encoding="utf-8"))["runs"][1]["id"] == "cand"


def test_help_lists_the_command(store_url: str) -> None:
    out = CliRunner().invoke(cli, ["--help"]).stdout

    assert "compare " in out
    assert "health " in out
