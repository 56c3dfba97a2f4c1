"""`trialkit health` over histories written straight to a temp store."""

# Markdown tables in the snapshots are wider than a line of code.
# ruff: noqa: E501

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from inline_snapshot import snapshot

from tests.analysis._store_runs import write_run
from trialkit.cli.main import cli
from trialkit.store import Store
from trialkit.task import SuiteKind


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """Three runs of the capability suite `qa` by two models, then one run of `other`."""
    url = f"sqlite:///{tmp_path}/s.db"
    runs = [
        ("m1", {"easy": "PPP", "bad": "FFF", "judged": "PGG", "flaky": "PFP", "hard": "FFF"}),
        ("m2", {"easy": "PPP", "bad": "FFE", "judged": "GPG", "flaky": "PPP", "hard": "PFF"}),
        ("m1", {"easy": "PPP", "bad": "FFF", "judged": "PPG", "flaky": "FFP", "hard": "PPF"}),
    ]
    with Store(url) as store:
        for hour, (model, tasks) in enumerate(runs):
            write_run(
                store, f"qa-{hour}", tasks, suite="qa", kind=SuiteKind.CAPABILITY, model=model,
                hours=hour,
            )  # fmt: skip
        write_run(store, "other-0", {"t": "PP"}, suite="other", hours=10)
    return url


def invoke(store_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["health", *args, "--store", store_url])
    return result.exit_code, result.stdout, result.stderr


def test_markdown(store_url: str) -> None:
    code, out, err = invoke(store_url, "--suite", "qa", "--format", "md")

    assert (code, err) == (0, "")
    assert out == snapshot("""\
## trialkit health · suite qa (capability) · last 3 runs (all there are; asked for 10)

| # | Run | Model | Started | Status |
|---:|---|---|---|---|
| 1 | qa-0 | m1 | 2025-06-01 09:00 | completed |
| 2 | qa-1 | m2 | 2025-06-01 10:00 | completed |
| 3 | qa-2 | m1 | 2025-06-01 11:00 | completed |

| Figure | Value |
|---|---|
| Tasks | 5 |
| Saturated | 1 of 5 (20.0%): easy |
| Graduation candidates | 1: easy |
| Broken | 2: bad, judged |
| Flaky | 2: flaky, hard |
| Models (latest runs) | m1 (4 passed), m2 (4 passed) |
| Discrimination | the suite does not discriminate between the 2 models at 95%: 0 of 5 tasks split them (exact McNemar p = 1) |

### Tasks

| Task | Kind | Runs | Passed | Pass rate | Undecided | By run | Trend | Health |
|---|---|---:|---:|---:|---:|---|---:|---|
| easy | capability | 3 | 9/9 | 100.0% | 0 | ███ | 0.0 pts/run | saturated: graduate to regression |
| bad | capability | 3 | 0/8 | 0.0% | 1 | ▁▁▁ | 0.0 pts/run | broken |
| judged | capability | 3 | 4/4 | 100.0% | 5 | ███ | 0.0 pts/run | broken |
| flaky | capability | 3 | 6/9 | 66.7% | 0 | ▆█▃ | −16.7 pts/run | flaky (2 of 3 runs) |
| hard | capability | 3 | 3/9 | 33.3% | 0 | ▁▃▆ | +33.3 pts/run | flaky (2 of 3 runs) |

### Broken tasks

#### bad

- never passed: 0 of 9 trials in 3 runs (8 failed, 1 errored), run by m1, m2

#### judged

- grader 'judge' errored on 5 of 9 trials: ValueError: unparseable judge answer
""")


def test_table(store_url: str) -> None:
    code, out, _ = invoke(store_url, "--suite", "qa")

    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if "capability" in line}
    assert "saturated: graduate to regression" in rows["easy"]
    assert "broken" in rows["bad"]
    assert "flaky (2 of 3 runs)" in rows["flaky"]
    assert "███" in rows["easy"]
    assert "never passed: 0 of 9 trials in 3 runs (8 failed, 1 errored), run by m1, m2" in out


def test_json_for_dashboards(store_url: str) -> None:
    code, out, _ = invoke(store_url, "--suite", "qa", "--last", "2", "--format", "json")

    data = json.loads(out)
    assert code == 0
    assert data["schema_version"] == 1
    assert [r["id"] for r in data["runs"]] == ["qa-1", "qa-2"]
    assert data["saturated"] == ["easy"]
    assert data["graduation_candidates"] == ["easy"]
    assert data["broken"] == ["bad", "judged"]
    tasks = {t["id"]: t for t in data["tasks"]}
    assert tasks["hard"]["pass_rates"] == [1 / 3, 2 / 3]
    assert tasks["hard"]["trend"] == pytest.approx(1 / 3)
    assert data["discrimination"]["models"] == ["m1", "m2"]


def test_the_default_suite_is_the_latest_runs(store_url: str) -> None:
    code, out, _ = invoke(store_url, "--format", "json")

    assert code == 0
    assert json.loads(out)["suite"]["id"] == "other"


def test_output_file(store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "health.md"

    code, out, _ = invoke(store_url, "--suite", "qa", "--format", "md", "-o", str(target))

    assert (code, out) == (0, "")
    assert target.read_text(encoding="utf-8").startswith("## trialkit health · suite qa")


def test_an_unknown_suite_is_a_one_line_error(store_url: str) -> None:
    code, out, err = invoke(store_url, "--suite", "nope")

    assert (code, out) == (2, "")
    assert err == (
        f"error: no run of suite 'nope' in the store {store_url} (suites with runs: other, qa)\n"
    )


def test_an_empty_store_is_a_one_line_error(tmp_path: Path) -> None:
    Store(f"sqlite:///{tmp_path}/empty.db").close()
    code, out, err = invoke(f"sqlite:///{tmp_path}/empty.db")

    assert (code, out) == (2, "")
    assert err == "error: the store has no runs yet: `trialkit run TARGET` makes one\n"


def test_last_must_be_positive(store_url: str) -> None:
    code, _, err = invoke(store_url, "--last", "0")

    assert code == 2
    assert "--last" in err
