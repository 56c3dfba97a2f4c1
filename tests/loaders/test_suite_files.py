"""Suite files: each feature of DESIGN §5 loads into the runtime objects it describes."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialkit import Message, SuiteKind, Turns, graders, run_sync
from trialkit.graders.compose import all_of, any_of, weighted
from trialkit.harness.chat import ChatHarness
from trialkit.loaders.suite_file import (
    GRADERS,
    SuiteFile,
    build_suite,
    is_suite_target,
    load_suite_file,
    load_suite_model,
    validate_suite_file,
)
from trialkit.models.base import GenerationConfig

from ._files import write

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "suites"


def test_inline_tasks_suite_fields_and_defaults(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: capitals
            description: Capitals.
            kind: regression
            trials: 3
            timeout: 12.5
            model: scripted/Paris
            system: Answer in one sentence.
            config: {temperature: 0, max_tokens: 50, top_p: 0.9, stop: ["\\n"], seed: 7}
            metadata: {owner: geo}
            tags: [smoke]
            graders:
              - not_contains: As an AI
            tasks:
              - id: france
                input: What is the capital of France?
                criteria: Names Paris.
                reference: Paris
                metadata: {difficulty: 1}
                tags: [europe, smoke]
                trials: 5
                timeout: 3
                graders: [{contains: paris}]
              - id: peru
                input: What is the capital of Peru?
            """
        },
    )
    suite = load_suite_file(tmp_path)
    assert (suite.id, suite.kind, suite.trials, suite.timeout) == (
        "capitals",
        SuiteKind.REGRESSION,
        3,
        12.5,
    )
    assert suite.model == "scripted/Paris" and suite.harness is None
    assert suite.system == "Answer in one sentence."
    assert suite.config == GenerationConfig(
        temperature=0, max_tokens=50, top_p=0.9, stop=["\n"], seed=7
    )
    assert suite.metadata == {"owner": "geo"} and suite.description == "Capitals."
    assert suite.graders == [graders.not_contains("As an AI")]
    france, peru = suite.tasks
    assert france.input == "What is the capital of France?"
    assert (france.criteria, france.reference, france.metadata) == (
        "Names Paris.",
        "Paris",
        {"difficulty": 1},
    )
    assert france.tags == ["smoke", "europe"]  # the suite's tags first, once
    assert (france.trials, france.timeout) == (5, 3)
    assert france.graders == [graders.contains("paris")]
    assert (peru.trials, peru.timeout, peru.graders, peru.tags) == (None, None, [], ["smoke"])
    report = run_sync(suite)
    assert [t.verdict for t in report.tasks] == ["pass", "pass"]


def test_every_built_in_grader_by_short_name(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": r"""
            id: graders
            model: scripted/echo
            tasks:
              - id: all
                input: x
                graders:
                  - contains: paris
                  - contains: {text: Paris, case_sensitive: true}
                  - contains: 100
                  - not_contains: berlin
                  - not_contains: {text: Berlin, case_sensitive: true}
                  - matches: '\d+'
                  - matches: {pattern: 'ab+', ignore_case: true}
                  - equals: Paris
                  - equals: {expected: paris, strip: false, case_sensitive: false}
                  - valid_json: {}
                  - valid_json:
                  - valid_json: {schema: {type: object}, where: "checks:has_city"}
                  - agent_failed:
                  - agent_failed: will not
                  - all_of: [{contains: a}, {contains: b}]
                  - any_of: [{contains: a}, {equals: b}]
                  - weighted:
                      pass_at: 0.6
                      graders:
                        - {grader: {contains: a}, weight: 2}
                        - {grader: {contains: b}}
                  - predicate: {description: short answer, fn: "checks:short", pass_at: 0.5}
            """,
            "checks.py": """
            def has_city(value):
                return "city" in value

            def short(ctx):
                return len(ctx.output) < 10
            """,
        },
    )
    built = load_suite_file(tmp_path).tasks[0].graders
    expected = [
        graders.contains("paris"),
        graders.contains("Paris", case_sensitive=True),
        graders.contains("100"),
        graders.not_contains("berlin"),
        graders.not_contains("Berlin", case_sensitive=True),
        graders.matches(r"\d+"),
        graders.matches("ab+", ignore_case=True),
        graders.equals("Paris"),
        graders.equals("paris", strip=False, case_sensitive=False),
        graders.valid_json(),
        graders.valid_json(),
    ]
    assert built[: len(expected)] == expected
    with_schema = built[11]
    assert isinstance(with_schema, graders.valid_json)
    assert with_schema.schema == {"type": "object"}
    assert with_schema.where is not None and with_schema.where({"city": 1})
    assert built[12:14] == [graders.agent_failed(), graders.agent_failed("will not")]
    assert isinstance(built[14], all_of) and [p.name for p in built[14].parts] == [
        "contains('a')",
        "contains('b')",
    ]
    assert isinstance(built[15], any_of) and len(built[15].parts) == 2
    assert isinstance(built[16], weighted)
    assert (built[16].weights, built[16].pass_at) == ([2.0, 1.0], 0.6)
    assert isinstance(built[17], graders.predicate)
    assert (built[17].description, built[17].pass_at) == ("short answer", 0.5)
    names = {"contains", "not_contains", "matches", "equals", "valid_json", "agent_failed"}
    names |= {"starts_with", "contains_any", "contains_all", "fuzzy_match", "levenshtein"}
    names |= {"tool_called", "tool_not_called", "tool_order", "max_tool_calls", "max_turns"}
    names |= {"no_tool_errors", "file_exists", "file_absent", "file_contains", "file_json"}
    names |= {"only_changed", "unchanged"}
    names |= {"all_of", "any_of", "weighted", "predicate", "python", "judge", "human"}
    assert names == set(GRADERS)


def test_a_human_grader_leaves_the_trial_pending(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: reviewed
            model: scripted/Paris
            tasks:
              - id: tone
                input: Capital of France?
                criteria: Names Paris.
                graders:
                  - contains: paris
                  - human: Is it polite?
                  - human: {name: accuracy, instructions: Is it right?}
                  - human:
            """
        },
    )
    suite = load_suite_file(tmp_path)
    built = suite.tasks[0].graders
    assert built[1:] == [
        graders.human(instructions="Is it polite?"),
        graders.human("accuracy", "Is it right?"),
        graders.human(),
    ]
    report = run_sync(suite)
    (result,) = report.tasks[0].results
    assert result.verdict == "unknown"
    assert report.tasks[0].pending == 1
    assert [(s.name, s.verdict, s.pending) for s in result.scores] == [
        ("contains('paris')", "pass", False),
        ("human", "unknown", True),
        ("accuracy", "unknown", True),
        ("human", "unknown", True),
    ]
    assert result.scores[1].metadata == {
        "instructions": "Is it polite?",
        "criteria": "Names Paris.",
    }


def test_custom_graders_by_python_reference(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: custom
            harness: {python: "agent:answer"}
            graders:
              - python: checks:polite
            tasks:
              - id: t
                input: hello
                graders:
                  - python: checks:Shouts
                  - python: {ref: checks:at_most, args: {chars: 20}}
                  - python: checks:ready_made
                  - python: sub/more.py:exclaims
            """,
            "agent.py": """
            def answer(prompt):
                return "HELLO, please!"
            """,
            "checks.py": """
            from trialkit import Grader, grader

            def polite(ctx):
                return "please" in ctx.output

            class Shouts(Grader):
                def grade(self, ctx):
                    return ctx.output.isupper()

            def at_most(chars):
                return lambda ctx: len(ctx.output) <= chars

            ready_made = grader(name="ready")(lambda ctx: 1.0)
            """,
            "sub/more.py": """
            def exclaims(ctx):
                return ctx.output.endswith("!")
            """,
        },
    )
    suite = load_suite_file(tmp_path)
    report = run_sync(suite)
    scores = report.tasks[0].results[0].scores
    assert [(s.name, s.verdict) for s in scores] == [
        ("polite", "pass"),
        ("Shouts", "fail"),
        ("<lambda>", "pass"),
        ("ready", "pass"),
        ("exclaims", "pass"),
    ]


def test_two_suites_with_modules_of_the_same_name_get_their_own(tmp_path: Path) -> None:
    for name, answer in (("one", "first"), ("two", "second")):
        write(
            tmp_path / name,
            {
                "suite.yaml": f"""
                id: {name}
                harness: {{python: agent:answer}}
                tasks: [{{id: t, input: x, graders: [{{equals: {answer}}}]}}]
                """,
                "agent.py": f"def answer(prompt):\n    return {answer!r}\n",
            },
        )
    for name in ("one", "two"):
        report = run_sync(load_suite_file(tmp_path / name))
        assert report.tasks[0].verdict == "pass"


def test_chat_messages_and_turns(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: chat
            model: scripted/echo
            tasks:
              - id: messages
                input:
                  - {role: system, content: Be terse.}
                  - {role: user, content: first}
                  - {role: assistant, content: ok}
                  - {role: user, content: second}
                graders: [{equals: second}]
              - id: turns
                turns:
                  - one
                  - [{role: system, content: Be terse.}, {role: user, content: two}]
                graders: [{equals: two}]
            """
        },
    )
    suite = load_suite_file(tmp_path)
    messages, turns = suite.tasks
    assert messages.input == [
        Message(role="system", content="Be terse."),
        Message(role="user", content="first"),
        Message(role="assistant", content="ok"),
        Message(role="user", content="second"),
    ]
    assert isinstance(turns.input, Turns) and len(turns.input) == 2
    assert turns.turns[0] == "one"
    assert run_sync(suite).summary.passed_tasks == 2


def test_tasks_folder_and_suite_file_as_target(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yml": "id: folder\nmodel: scripted/x\ntasks: [{id: inline, input: a}]\n",
            "tasks/b.yaml": "id: b\ninput: b\n",
            "tasks/a.json": '{"id": "a", "input": "a", "graders": [{"contains": "x"}]}\n',
            "tasks/more/c.yml": "id: c\nturns: [c, d]\n",
            "tasks/.hidden.yaml": "not: a task\n",
        },
    )
    ids = ["inline", "a", "b", "c"]
    assert [t.id for t in load_suite_file(tmp_path).tasks] == ids
    assert [t.id for t in load_suite_file(tmp_path / "suite.yml").tasks] == ids
    write(tmp_path, {"other.yaml": "id: alone\nmodel: scripted/x\ntasks: [{id: x, input: y}]\n"})
    assert [t.id for t in load_suite_file(tmp_path / "other.yaml").tasks] == ["x"]


def test_dataset_from_jsonl_csv_and_json(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: data
            model: scripted/echo
            dataset:
              - path: data/rows.jsonl
                id: "q-{{code}}"
                input: "Capital of {{country}}?"
                reference: "{{capital}}"
                criteria: "Says {{capital}}."
                metadata: {capital: "{{capital}}", population: "{{population}}", raw: plain}
                tags: ["{{region}}", data]
                graders: [{contains: "{{country}}"}, {matches: "^Capital of {{country}}"}]
                trials: 2
                expect: success
              - path: data/questions.csv
                input: "{{question}}"
                graders: [{equals: "{{question}}"}]
              - path: data/items.json
            """,
            "data/rows.jsonl": (
                '{"code": "fr", "country": "France", "capital": "Paris", '
                '"population": 68, "region": "europe"}\n'
                "\n"
                '{"code": "pe", "country": "Peru", "capital": "Lima", '
                '"population": 34, "region": "americas"}\n'
            ),
            "data/questions.csv": 'question,unused\n"Two, with a comma",x\nOne,y\n',
            "data/items.json": """
            [
              {"input": "plain text"},
              {"input": [{"role": "user", "content": "as messages"}]}
            ]
            """,
        },
    )
    suite = load_suite_file(tmp_path)
    ids = ["q-fr", "q-pe", "questions-1", "questions-2", "items-1", "items-2"]
    assert [t.id for t in suite.tasks] == ids
    fr, _pe, two, _one, plain, messages = suite.tasks
    assert fr.input == "Capital of France?" and fr.reference == "Paris"
    assert fr.criteria == "Says Paris."
    assert fr.metadata == {"capital": "Paris", "population": 68, "raw": "plain"}
    assert fr.tags == ["europe", "data"] and fr.trials == 2
    assert fr.graders == [graders.contains("France"), graders.matches("^Capital of France")]
    assert two.input == "Two, with a comma" and two.graders == [graders.equals("Two, with a comma")]
    assert plain.input == "plain text"
    assert messages.input == [Message(role="user", content="as messages")]
    assert run_sync(suite).summary.passed_tasks == 6


def test_ids_of_json_datasets_follow_their_rows(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": "id: d\nmodel: scripted/x\ndataset: {path: items.json, id: '{{n}}'}\n",
            "items.json": '[{"n": 1, "input": "a"}, {"n": 2.5, "input": "b"}]',
        },
    )
    assert [t.id for t in load_suite_file(tmp_path).tasks] == ["1", "2.5"]


def test_templates_reach_into_nested_fields_and_write_json(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: nested
            model: scripted/x
            dataset:
              path: rows.jsonl
              input: "{{q.text}} {{q.options}} {{q.options.1}}"
            """,
            "rows.jsonl": '{"q": {"text": "Pick:", "options": ["a", "b"]}}\n',
        },
    )
    assert load_suite_file(tmp_path).tasks[0].input == 'Pick: ["a", "b"] b'


def test_harness_choices(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "model/suite.yaml": "id: m\nharness: {model: scripted/hi}\ntasks: [{id: t, input: x}]",
            "session/suite.yaml": "id: s\nharness: {python: bot:Agent}\ntasks: [{id: t, input: x}]",
            "session/bot.py": """
            class Agent:
                def send(self, message):
                    return "from a session"
            """,
        },
    )
    by_model = load_suite_file(tmp_path / "model")
    assert isinstance(by_model.harness, ChatHarness) and by_model.harness.model == "scripted/hi"
    assert run_sync(by_model).tasks[0].results[0].output == "hi"
    by_class = load_suite_file(tmp_path / "session")
    assert run_sync(by_class).tasks[0].results[0].output == "from a session"


def test_python_environment(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: env
            model: scripted/x
            environment: {python: worlds:Counter}
            tasks: [{id: t, input: x}]
            """,
            "worlds.py": """
            from trialkit import Environment

            class Counter(Environment):
                name = "counter"
            """,
        },
    )
    environment = load_suite_file(tmp_path).environment
    assert environment is not None and environment.name == "counter"


def test_mixed_suite_task_kinds_and_task_settings(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: mixed
            kind: mixed
            model: scripted/x
            tasks:
              - id: cap
                kind: capability
                input: x
                model: scripted/y
                config: {temperature: 0.5}
                response_format: {type: json_schema, json_schema: {type: object}}
                expect: failure
              - {id: reg, kind: regression, input: y}
            """
        },
    )
    cap, reg = load_suite_file(tmp_path).tasks
    assert (cap.kind, reg.kind, cap.model, cap.expect) == (
        SuiteKind.CAPABILITY,
        SuiteKind.REGRESSION,
        "scripted/y",
        "failure",
    )
    assert cap.config == GenerationConfig(temperature=0.5)
    assert cap.response_format is not None and cap.response_format.json_schema == {"type": "object"}


def test_build_suite_from_a_model_made_in_python(tmp_path: Path) -> None:
    """What importers do: make a `SuiteFile`, then build it relative to a folder."""
    model = SuiteFile.model_validate(
        {
            "id": "imported",
            "model": "scripted/Paris",
            "tasks": [{"id": "t", "input": "x", "graders": [{"contains": "paris"}]}],
        }
    )
    suite = build_suite(model, tmp_path, source="imported.jsonl")
    assert suite.tasks[0].graders == [graders.contains("paris")]
    assert run_sync(suite).summary.passed_tasks == 1


def test_is_suite_target(tmp_path: Path) -> None:
    assert is_suite_target(tmp_path) and is_suite_target("a/suite.YAML")
    assert is_suite_target("x.json") and is_suite_target("x.yml")
    assert not is_suite_target("evals.py") and not is_suite_target("evals.py:suite")


@pytest.mark.parametrize("name", ["capitals", "echo-json"])
def test_examples_run_offline_and_pass(name: str) -> None:
    folder = EXAMPLES / name
    assert validate_suite_file(folder) == []
    suite = load_suite_file(folder)
    report = run_sync(suite)
    assert report.summary.tasks == len(suite.tasks) > 4
    assert report.summary.passed_tasks == report.summary.tasks
    assert report.summary.errors == 0


def test_the_examples_declare_their_tasks() -> None:
    capitals = load_suite_model(EXAMPLES / "capitals")
    assert [t.id for t in capitals.tasks] == [
        "france",
        "chat-japan",
        "json-answer",
        "multi-turn",
        "refuses-deletion",
    ]
    assert [d.path for d in capitals.dataset] == ["data/countries.jsonl", "data/more.csv"]
