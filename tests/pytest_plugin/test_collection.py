"""Collection: suites and tasks as pytest nodes; pytest's selection options work on them."""

from __future__ import annotations

import pytest

from tests.pytest_plugin.conftest import default_store

NODE_IDS = [
    "eval_capitals.py::capitals::france",
    "eval_capitals.py::capitals::spain",
    "eval_capitals.py::capitals::crash",
    "eval_capitals.py::explore::spain",
    "eval_capitals.py::explore::never",
]

SUITE_YAML = """\
id: greet
kind: regression
trials: 2
model: scripted/hello
tasks:
  - id: hi
    input: Say hello
    graders:
      - contains: hello
"""


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


def test_each_suite_is_a_collector_and_each_task_an_item(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert collected(result) == NODE_IDS
    assert not default_store(capitals).exists()  # collecting runs nothing and stores nothing


def test_k_selects_by_suite_and_task_id(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-k", "spain")
    assert collected(result) == [NODE_IDS[1], NODE_IDS[3]]
    result = capitals.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-k", "explore")
    assert collected(result) == NODE_IDS[3:]


def test_m_trialkit_and_tags_select_with_strict_markers(capitals: pytest.Pytester) -> None:
    capitals.makepyfile(test_plain="def test_plain():\n    pass\n")
    args = ["-p", "no:cacheprovider", "--strict-markers", "--collect-only", "-q"]
    result = capitals.runpytest(*args, "-m", "trialkit")
    assert collected(result) == NODE_IDS
    result = capitals.runpytest(*args, "-m", "not trialkit")
    assert collected(result) == ["test_plain.py::test_plain"]
    result = capitals.runpytest(*args, "-m", "europe")  # a task's tag
    assert collected(result) == [NODE_IDS[0]]


def test_deselect_and_a_node_id_on_the_command_line(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest(
        "-p", "no:cacheprovider", "-q", "--deselect", NODE_IDS[2], "eval_capitals.py::capitals"
    )
    result.assert_outcomes(passed=1, failed=1)
    result = capitals.runpytest("-p", "no:cacheprovider", "-q", NODE_IDS[0])
    result.assert_outcomes(passed=1)


def test_x_stops_at_the_first_failure_and_the_run_says_so(capitals: pytest.Pytester) -> None:
    from tests.pytest_plugin.conftest import stored_runs

    result = capitals.runpytest("-p", "no:cacheprovider", "-x", "-k", "capitals")
    result.assert_outcomes(passed=1, failed=1)
    run = stored_runs(default_store(capitals))["capitals"]
    assert run.run.status == "stopped"
    assert "crash" in run.run.config["stop_reason"]
    assert [t.trials for t in run.tasks] == [3, 3, 0]


def test_lf_runs_only_the_tasks_that_failed(capitals: pytest.Pytester) -> None:
    capitals.runpytest("-q").assert_outcomes(passed=3, failed=1, errors=1)
    result = capitals.runpytest("-q", "--lf")
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(["*3 deselected*"])


def test_trialkit_files_names_the_files_of_suites(capitals: pytest.Pytester) -> None:
    capitals.makeini("[pytest]\ntrialkit_files = suites_*.py\n")
    (capitals.path / "eval_capitals.py").rename(capitals.path / "suites_capitals.py")
    capitals.makepyfile(eval_other="raise RuntimeError('not a suite file here')\n")
    result = capitals.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert collected(result) == [n.replace("eval_", "suites_") for n in NODE_IDS]


def test_a_suite_folder_named_on_the_command_line(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("evals")
    (folder / "greet").mkdir()
    (folder / "greet" / "suite.yaml").write_text(SUITE_YAML)
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "evals/greet")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "evals")
    assert collected(result) == ["evals/greet/suite.yaml::greet::hi"]


def test_suite_files_are_left_alone_unless_named(pytester: pytest.Pytester) -> None:
    (pytester.mkdir("evals") / "suite.yaml").write_text(SUITE_YAML)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)  # the ordinary test alone


def test_trialkit_suites_lists_suites_to_collect(pytester: pytest.Pytester) -> None:
    (pytester.mkdir("evals") / "suite.yaml").write_text(SUITE_YAML)
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    pytester.makeini("[pytest]\ntestpaths = tests\ntrialkit_suites = evals\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert collected(result) == ["tests/test_plain.py::test_plain", "evals/suite.yaml::greet::hi"]


def test_a_bad_suite_file_is_a_clean_collection_error(pytester: pytest.Pytester) -> None:
    bad = SUITE_YAML.replace("kind: regression", "kind: regresion").replace("contains:", "contain:")
    (pytester.path / "suite.yaml").write_text(bad)
    result = pytester.runpytest("-p", "no:cacheprovider", "suite.yaml")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting suite.yaml*",
            "suite.yaml:2: kind: Input should be 'capability', 'regression' or 'mixed'*",
            "suite.yaml:9: tasks?0?.graders?0?: unknown grader 'contain'; did you mean*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "def collect" not in result.stdout.str()


def test_a_broken_eval_file_is_a_clean_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        eval_broken="from trialkit import Suite\n\nsuite = Suite(id='x', tasks=[], kind='odd')\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*eval_broken.py:3: suite 'x': kind: must be *, got 'odd'"])
    assert "Traceback" not in result.stdout.str()


def test_two_suites_with_one_id_in_a_file_are_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        eval_twice="from trialkit import Suite, Task\n\n"
        "a = Suite(id='same', tasks=[Task(id='t', input='x')])\n"
        "b = Suite(id='same', tasks=[Task(id='t', input='x')])\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*a and b are both suites with the id 'same'*"])


def test_an_ordinary_session_is_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--strict-markers", "-W", "error")
    result.assert_outcomes(passed=1)
    assert "== trialkit ==" not in result.stdout.str()
    assert not (pytester.path / ".trialkit").exists()
