"""`trialkit compare --format github` between a JSON report file and a stored run of another
store, annotations at the suite file's lines, and the JUnit options of `trialkit report`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xmlschema
from click.testing import CliRunner
from junitparser import JUnitXml, Skipped

from trialkit.cli.main import cli
from trialkit.reports.github import COMMENT_MARKER

HARD = (
    '        Task(id="hard", input="hard", kind="capability", graders=[graders.contains("maybe")]),'
)
XSD = Path(__file__).resolve().parents[1] / "data" / "junit-10.xsd"

SUITE = """\
import os
from trialkit import Suite, Task, graders



def agent(prompt: str) -> str:
    broken = os.environ.get("AGENT_BROKEN") == "1"
    return "no" if broken and prompt.startswith("q") else "yes"


suite = Suite(
    id="ci",
    kind="mixed",
    trials=2,
    harness=agent,
    tasks=[
        *[
            Task(id=f"q{i}", input=f"q{i}", kind="regression", graders=[graders.contains("yes")])
            for i in range(7)
        ],
        Task(
            id="stable",
            input="stable",
            kind="regression",
            graders=[graders.contains("yes")],
        ),
        Task(id="hard", input="hard", kind="capability", graders=[graders.contains("maybe")]),
    ],
)
"""


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "evals.py").write_text(SUITE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRIALKIT_STORE", raising=False)
    return tmp_path


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def run(store: str, json_path: str, *, broken: bool) -> str:
    code, _, err = invoke(
        "run",
        "evals.py",
        "--store",
        store,
        "--json",
        json_path,
        "--no-progress",
        "--quiet",
        env={"AGENT_BROKEN": "1" if broken else "0"},
    )
    assert code == (1 if broken else 0), err
    return json.loads(Path(json_path).read_text())["run"]["id"]


def line_of(text: str) -> int:
    return SUITE.splitlines().index(text) + 1


def test_a_json_report_against_a_stored_run_of_another_store(work: Path) -> None:
    run("sqlite:///main.db", "base.json", broken=False)
    cand = run("sqlite:///pr.db", "cand.json", broken=True)

    code, out, err = invoke(
        "compare",
        "base.json",
        cand,
        "--store",
        "sqlite:///pr.db",
        "--format",
        "github",
        "--annotations",
        "--report-url",
        "https://ci.example/pr.html",
        "--fail-on-regression",
    )

    assert code == 1, err
    assert "regression: run B is significantly worse than run A" in err
    lines = out.splitlines()
    notes = [line for line in lines if line.startswith("::")]
    q_line = next(n for n, line in enumerate(SUITE.splitlines(), 1) if 'id=f"q{i}"' in line)
    assert notes[:7] == [
        f"::error file=evals.py,line={q_line},title=q{i}%3A new failure::baseline A: pass 2/2 "
        "100.0%25; B: fail 0/2 0.0%25"
        for i in range(7)
    ]
    assert notes[7] == (
        f"::warning file=evals.py,line={line_of(HARD)},"
        "title=hard%3A still fail::baseline A: fail 0/2 0.0%25; B: fail 0/2 0.0%25"
    )
    body = "\n".join(lines[len(notes) :])
    assert body.startswith(
        COMMENT_MARKER + "\n❌ **trialkit: worse than the baseline on these tasks**"
    )
    assert "### New failures (7)" in body
    assert "<details><summary>2 other tasks (unchanged)</summary>" in body
    assert f"| stable | `evals.py:{line_of('        Task(')}` |" in body
    assert "(https://ci.example/pr.html)" in body


def test_two_report_files_need_no_store(work: Path) -> None:
    run("sqlite:///main.db", "base.json", broken=False)
    run("sqlite:///pr.db", "cand.json", broken=True)
    (work / "main.db").unlink()
    (work / "pr.db").unlink()

    code, out, err = invoke("compare", "base.json", "cand.json", "--format", "md")

    assert code == 0, err
    assert "New failures in B" in out
    assert not (work / ".trialkit").exists()
    code, _, err = invoke("compare", "base.json", "cand.json", "--report-url", "https://x")
    assert (code, err.strip()) == (2, "error: --report-url is for --format github")
    code, _, err = invoke(
        "compare",
        "base.json",
        "cand.json",
        "--format",
        "github",
        "--report-url",
        "a",
        "--report-url",
        "b",
        "--report-url",
        "c",
    )
    assert code == 2 and "3 URLs for 2 runs" in err
    (work / "bad.json").write_text('{"schema_version": 99}')
    code, _, err = invoke("compare", "bad.json", "cand.json")
    assert code == 2 and "bad.json: this report has schema_version 99" in err


def extended_schema() -> xmlschema.XMLSchema:
    """junit-10.xsd with `file` and `line` declared on `<testcase>` (as pytest's xunit1 and
    the readers of GitLab and junitparser take them)."""
    text = XSD.read_text(encoding="utf-8")
    declared = (
        '<xs:attribute name="group" type="xs:string"/>\n        </xs:complexType>\n'
        '    </xs:element>\n\n    <xs:element name="testsuite">'
    )
    assert declared in text
    extra = (
        '<xs:attribute name="file" type="xs:string"/><xs:attribute name="line" type="xs:string"/>'
    )
    return xmlschema.XMLSchema(text.replace(declared, extra + declared, 1))


def test_junit_of_a_stored_run_locations_capability_failures_and_wall_times(work: Path) -> None:
    cand = run("sqlite:///pr.db", "cand.json", broken=True)
    report = json.loads((work / "cand.json").read_text())
    strict = xmlschema.XMLSchema(str(XSD))

    code, out, err = invoke("report", cand, "--store", "sqlite:///pr.db", "--format", "junit")

    assert code == 0, err
    strict.validate(out)
    xml = JUnitXml.fromstring(out.encode())
    (suite,) = list(xml)
    cases = {case.name: case for case in suite}
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (9, 7, 0, 1)
    (skipped,) = cases["hard"].result
    assert isinstance(skipped, Skipped)
    assert "a capability task: failing it does not fail the gate" in skipped.text
    hard_line = line_of(HARD)
    assert cases["hard"].system_out == f"defined at evals.py:{hard_line}"
    # Wall times: from the first trial's start to the last one's end, as the JSON report says.
    walls = {t["id"]: t["wall_s"] for t in report["tasks"]}
    for name, case in cases.items():
        assert case.time == pytest.approx(walls[name], abs=0.0015)
        durations = sum(
            r["duration_s"] for r in report["tasks"][list(walls).index(name)]["results"]
        )
        assert walls[name] <= durations + 0.001
    assert suite.time == pytest.approx(report["summary"]["duration_s"], abs=0.0015)

    code, out, err = invoke(
        "report",
        cand,
        "--store",
        "sqlite:///pr.db",
        "--format",
        "junit",
        "--junit-locations",
        "attributes",
        "--junit-capability",
        "failure",
    )

    assert code == 0, err
    extended_schema().validate(out)
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        strict.validate(out)
    (suite,) = list(JUnitXml.fromstring(out.encode()))
    assert (suite.failures, suite.skipped) == (8, 0)
    hard = next(case for case in suite if case.name == "hard")
    assert (hard._elem.get("file"), hard._elem.get("line")) == ("evals.py", str(hard_line))

    code, out, _ = invoke(
        "report",
        cand,
        "--store",
        "sqlite:///pr.db",
        "--format",
        "junit",
        "--junit-capability",
        "passed",
    )
    (suite,) = list(JUnitXml.fromstring(out.encode()))
    assert (suite.failures, suite.skipped) == (7, 0)
    assert next(case for case in suite if case.name == "hard").is_passed
