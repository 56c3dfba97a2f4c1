"""`trialkit validate TARGET`: every problem on stderr and exit 2, or `ok` and exit 0."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from trialkit.cli.validate import validate_command

from ._files import write

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _validate(target: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(validate_command, [str(target)])
    return result.exit_code, result.stdout, result.stderr


def test_good_suites() -> None:
    assert _validate(EXAMPLES / "suites" / "capitals") == (
        0,
        "ok: suite capitals-folder, 10 tasks\n",
        "",
    )
    assert _validate(EXAMPLES / "suites" / "echo-json" / "suite.json") == (
        0,
        "ok: suite echo-json, 5 tasks\n",
        "",
    )
    assert _validate(f"{EXAMPLES / 'python_agent' / 'evals.py'}:regression") == (
        0,
        "ok: suite python-agent-regression, 4 tasks\n",
        "",
    )


def test_every_problem_then_exit_2(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: bad
            trials: 0
            tasks:
              - id: a
                input: x
                graders: [{judge: {rubric: Says Paris., model: gpt-4o}}]
            """,
            "tasks/b.yaml": "id: b\ninput: y\ncolour: red\n",
        },
    )
    code, out, err = _validate(tmp_path)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{tmp_path}/suite.yaml:2: trials: Input should be greater than or equal to 1, "
        "got a number 0",
        f"{tmp_path}/suite.yaml:6: tasks[0].graders[0].judge: model 'gpt-4o': expected "
        "provider/name, e.g. openai/gpt-4o-mini (providers: openai, anthropic, local, scripted)",
        f"{tmp_path}/tasks/b.yaml:3: colour: unknown field",
        f"error: 3 problems in {tmp_path}",
    ]


def test_a_python_target_problem_is_one_line(tmp_path: Path) -> None:
    target = EXAMPLES / "python_agent" / "evals.py"
    code, out, err = _validate(target)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{target}: defines 2 suites (capability, regression); pick one with {target}:NAME",
        f"error: 1 problem in {target}",
    ]
    code, _, err = _validate(tmp_path / "absent.yaml")
    assert code == 2
    assert err.splitlines()[0] == f"{tmp_path}/absent.yaml: no such file or folder"
