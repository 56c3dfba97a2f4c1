from pathlib import Path
from textwrap import dedent

import pytest

from tests.importers._run import verdicts
from trialkit import SuiteError
from trialkit.loaders.importers import ImportFailed, load_promptfoo
from trialkit.loaders.importers._promptfoo_parts import model_id
from trialkit.models.base import GenerationConfig
from trialkit.transcript import Message


def _config(tmp_path: Path, text: str, name: str = "promptfooconfig.yaml") -> Path:
    path = tmp_path / name
    path.write_text(dedent(text).lstrip(), encoding="utf-8")
    return path


GETTING_STARTED = """
    description: Getting started
    prompts:
      - "Convert the following English text to {{language}}: {{input}}"
    providers:
      - openai:gpt-4o-mini
      - id: anthropic:messages:claude-sonnet-4-5
        config: {temperature: 0.2, max_tokens: 256}
    tests:
      - vars:
          language: French
          input: Hello world
        assert:
          - type: contains
            value: Bonjour le monde
      - vars:
          language: Spanish
          input: Where is the library?
        assert:
          - type: icontains
            value: Dónde está la biblioteca
"""


def test_prompts_times_tests_times_providers(tmp_path: Path) -> None:
    suite = load_promptfoo(_config(tmp_path, GETTING_STARTED))
    assert (suite.id, suite.kind, suite.trials, suite.model) == (
        "getting-started",
        "regression",
        1,
        None,
    )
    assert [(t.id, t.model, t.tags) for t in suite.tasks] == [
        ("test-1@openai-gpt-4o-mini", "openai/gpt-4o-mini", ["openai-gpt-4o-mini"]),
        (
            "test-1@anthropic-claude-sonnet-4-5",
            "anthropic/claude-sonnet-4-5",
            ["anthropic-claude-sonnet-4-5"],
        ),
        ("test-2@openai-gpt-4o-mini", "openai/gpt-4o-mini", ["openai-gpt-4o-mini"]),
        (
            "test-2@anthropic-claude-sonnet-4-5",
            "anthropic/claude-sonnet-4-5",
            ["anthropic-claude-sonnet-4-5"],
        ),
    ]
    first = suite.tasks[0]
    assert first.input == "Convert the following English text to French: Hello world"
    assert first.metadata == {
        "vars": {"language": "French", "input": "Hello world"},
        "provider": "openai:gpt-4o-mini",
    }
    assert suite.tasks[1].config == GenerationConfig(temperature=0.2, max_tokens=256)
    assert [g.name for g in first.graders] == ["contains('Bonjour le monde')"]  # type: ignore[union-attr]


def test_model_replaces_the_providers(tmp_path: Path) -> None:
    suite = load_promptfoo(_config(tmp_path, GETTING_STARTED), model="scripted/echo")
    assert suite.model == "scripted/echo"
    assert [t.id for t in suite.tasks] == ["test-1", "test-2"]
    assert all(t.model is None for t in suite.tasks)
    # echo answers with the prompt, which names neither translation
    assert verdicts(suite) == {"test-1": "fail", "test-2": "fail"}


@pytest.mark.parametrize(
    ("source", "model"),
    [
        ("echo", "scripted/echo"),
        ("openai:gpt-4o-mini", "openai/gpt-4o-mini"),
        ("openai:chat:gpt-4o-mini", "openai/gpt-4o-mini"),
        ("openai:responses:o4-mini", "openai/o4-mini"),
        ("openai:chat:ft:gpt-4o-mini:acme::abc", "openai/ft:gpt-4o-mini:acme::abc"),
        ("anthropic:messages:claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
        ("anthropic:claude-3-5-haiku-latest", "anthropic/claude-3-5-haiku-latest"),
        ("openai:completion:davinci-002", None),
        ("openai:embedding:text-embedding-3-small", None),
        ("ollama:chat:llama3", None),
        ("file://provider.py", None),
        ("openai:chat", None),
    ],
)
def test_provider_ids(source: str, model: str | None) -> None:
    assert model_id(source) == model


# One test per assertion type, with `not-` twins: echo answers with the prompt, `{{text}}`.
CASES = [
    ("equals", "'exact text'", "exact text", True),
    ("equals", "'Exact text'", "exact text", False),
    ("equals", "{a: [1, true]}", '{"a": [1, true]}', True),
    ("equals", "42", "42", True),
    ("contains", "Paris", "in Paris today", True),
    ("contains", "paris", "in Paris today", False),
    ("icontains", "PARIS", "in Paris today", True),
    ("contains-any", "[Rome, Paris]", "in Paris today", True),
    ("contains-any", "'Rome, Madrid'", "in Paris today", False),
    ("icontains-any", "[rome, paris]", "in Paris today", True),
    ("contains-all", "[in, today]", "in Paris today", True),
    ("contains-all", "[in, tomorrow]", "in Paris today", False),
    ("icontains-all", "[IN, PARIS]", "in Paris today", True),
    ("regex", r"'^in \w+ today$'", "in Paris today", True),
    ("regex", r"'\d'", "in Paris today", False),
    ("starts-with", "in Par", "in Paris today", True),
    ("starts-with", "Paris", "in Paris today", False),
    ("is-json", "", '{"city": "Paris"}', True),
    ("is-json", "{type: object, required: [town]}", '{"city": "Paris"}', False),
    ("contains-json", "", 'here: {"city": "Paris"}', True),
    ("contains-json", "", "no json here", False),
    ("levenshtein", "in Paris tonight", "in Paris today", True),
    ("levenshtein", "completely different", "in Paris today", False),
]


def _cases_config() -> str:
    tests = []
    for i, (kind, value, text, _) in enumerate(CASES):
        for prefix in ("", "not-"):
            value_line = f"\n            value: {value}" if value else ""
            tests.append(
                f"""
      - description: {prefix}{kind} {i}
        vars: {{text: {text!r}}}
        assert:
          - type: {prefix}{kind}{value_line}"""
            )
    return "prompts: ['{{text}}']\nproviders: [echo]\ntests:" + "".join(tests) + "\n"


def test_each_type_and_its_not_twin(tmp_path: Path) -> None:
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(_cases_config(), encoding="utf-8")
    got = verdicts(load_promptfoo(path))
    expected = {}
    for i, (kind, _, _, ok) in enumerate(CASES):
        expected[f"{kind}-{i}"] = "pass" if ok else "fail"
        expected[f"not-{kind}-{i}"] = "fail" if ok else "pass"
    assert got == expected


def test_weights_and_thresholds(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
        prompts: ["{{text}}"]
        providers: [echo]
        tests:
          - description: under the threshold
            vars: {text: alpha}
            threshold: 0.5
            assert:
              - {type: contains, value: alpha, weight: 1}
              - {type: contains, value: beta, weight: 3}
          - description: over the threshold
            vars: {text: alpha}
            threshold: 0.5
            assert:
              - {type: contains, value: alpha, weight: 3}
              - {type: contains, value: beta, weight: 1}
          - description: without a threshold every check counts
            vars: {text: alpha}
            assert:
              - {type: contains, value: alpha, weight: 3}
              - {type: contains, value: beta, weight: 1}
          - description: weight 0 is reported only
            vars: {text: alpha}
            assert:
              - {type: contains, value: alpha}
              - {type: contains, value: beta, weight: 0}
          - description: a set passes on its own threshold
            vars: {text: alpha}
            assert:
              - type: assert-set
                threshold: 0.5
                assert:
                  - {type: contains, value: alpha}
                  - {type: contains, value: beta}
          - description: a set without one needs all
            vars: {text: alpha}
            assert:
              - type: assert-set
                assert:
                  - {type: contains, value: alpha}
                  - {type: contains, value: beta}
        """,
    )
    suite = load_promptfoo(path)
    assert verdicts(suite) == {
        "under-the-threshold": "fail",
        "over-the-threshold": "pass",
        "without-a-threshold-every-check-counts": "fail",
        "weight-0-is-reported-only": "pass",
        "a-set-passes-on-its-own-threshold": "pass",
        "a-set-without-one-needs-all": "fail",
    }
    names = [g.name for g in suite.tasks[3].graders]  # type: ignore[union-attr]
    assert names == ["contains('alpha')", "contains('beta') (weight 0)"]


def test_default_test_is_merged(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
        prompts: ["{{greeting}}, {{name}}"]
        providers: [echo]
        defaultTest:
          vars: {greeting: Hello}
          threshold: 0.5
          metadata: {team: core}
          assert:
            - {type: not-contains, value: Goodbye}
        tests:
          - vars: {name: Ada}
            metadata: {owner: ada}
            assert:
              - {type: contains, value: Grace}
          - vars: {name: Grace, greeting: Goodbye}
            threshold: 1
            assert:
              - {type: contains, value: Grace}
        """,
    )
    suite = load_promptfoo(path)
    first, second = suite.tasks
    assert first.input == "Hello, Ada" and second.input == "Goodbye, Grace"
    assert first.metadata["team"] == "core" and first.metadata["owner"] == "ada"
    # test-1: 1 of 2 passes, at the default threshold 0.5; test-2: its own threshold 1
    assert verdicts(suite) == {"test-1": "pass", "test-2": "fail"}


def test_list_vars_expand_and_ids_are_unique(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
        prompts: ["Say {{word}}", "Shout {{word}}"]
        providers: [echo]
        tests:
          - description: Same name
            vars: {word: [one, two]}
            assert: [{type: icontains, value: "{{word}}"}]
          - description: Same name
            vars: {word: three, items: [1, a]}
            assert: [{type: contains, value: "three"}]
        """,
    )
    suite = load_promptfoo(path)
    assert [(t.id, t.input) for t in suite.tasks] == [
        ("same-name@prompt-1", "Say one"),
        ("same-name@prompt-2", "Shout one"),
        ("same-name-2@prompt-1", "Say two"),
        ("same-name-2@prompt-2", "Shout two"),
        ("same-name-3@prompt-1", "Say three"),
        ("same-name-3@prompt-2", "Shout three"),
    ]
    assert suite.tasks[4].metadata["vars"]["items"] == [1, "a"]  # not a list of strings: kept
    assert set(verdicts(suite).values()) == {"pass"}


def test_files_chat_prompts_and_repeat(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "two.txt").write_text(
        "First about {{topic}}\n---\nSecond about {{topic}}\n", encoding="utf-8"
    )
    (tmp_path / "prompts" / "chat.json").write_text(
        '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "On {{topic}}"}]',
        encoding="utf-8",
    )
    (tmp_path / "topic.txt").write_text("tides", encoding="utf-8")
    (tmp_path / "tests.yaml").write_text(
        "- description: from a file\n  vars: {topic: file://topic.txt}\n"
        "  assert: [{type: contains, value: tides}]\n",
        encoding="utf-8",
    )
    path = _config(
        tmp_path,
        """
        prompts:
          - file://prompts/*.txt
          - {id: file://prompts/chat.json, label: chat}
          - '[{"role": "user", "content": "Inline {{topic}}"}]'
        providers: [echo]
        evaluateOptions: {repeat: 2, maxConcurrency: 4}
        tests: file://tests.yaml
        """,
    )
    suite = load_promptfoo(path)
    assert suite.trials == 2
    inputs = {t.id: t.input for t in suite.tasks}
    assert inputs == {
        "from-a-file@two-1": "First about tides",
        "from-a-file@two-2": "Second about tides",
        "from-a-file@chat": [
            Message(role="system", content="Be brief."),
            Message(role="user", content="On tides"),
        ],
        "from-a-file@prompt-4": [Message(role="user", content="Inline tides")],
    }
    assert set(verdicts(suite).values()) == {"pass"}


def test_unsupported_types_are_listed_in_one_error(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
        prompts: ["{{q}}"]
        providers: [echo]
        defaultTest:
          assert:
            - type: llm-rubric
              value: is polite
        tests:
          - vars: {q: a}
            assert:
              - type: contains
                value: a
              - type: javascript
                value: output.length < 10
          - vars: {q: b}
            assert:
              - type: assert-set
                assert:
                  - type: not-similar
                    value: b
                  - type: python
                    value: file://check.py
        """,
    )
    with pytest.raises(ImportFailed) as info:
        load_promptfoo(path)
    error = info.value
    assert isinstance(error, SuiteError)
    f = str(path)
    assert error.problems == [
        f"{f}:5: defaultTest.assert[0].type: unsupported assertion type 'llm-rubric'",
        f"{f}:12: tests[0].assert[1].type: unsupported assertion type 'javascript'",
        f"{f}:18: tests[1].assert[0].assert[0].type: unsupported assertion type 'not-similar'",
        f"{f}:20: tests[1].assert[0].assert[1].type: unsupported assertion type 'python'",
    ]
    lines = str(error).splitlines()
    assert lines[0] == (
        f"{f}: cannot import (4 problems); unsupported assertion types: javascript (1 place), "
        "llm-rubric (1 place), not-similar (1 place), python (1 place):"
    )
    assert lines[-1].startswith("trialkit imports the assertion types equals, contains,")


def test_other_problems_are_collected_too(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
        prompts:
          - "Hi {{name | upper}}"
          - "Hi {% if x %}{{name}}{% endif %}"
          - "Hi {{nobody}}"
          - file://missing.txt
          - file://prompt.py
        providers:
          - ollama:chat:llama3
          - id: openai:gpt-4o-mini
            config: {apiBaseUrl: "http://localhost:1234", apiKey: secret}
        scenarios: []
        tests:
          - vars: {name: Ada}
            options: {transform: output.trim()}
            repeat: 3
            assert:
              - {type: contains}
              - {type: regex, value: "("}
              - {type: contains, value: x, weight: -1}
              - {type: contains, value: x, transform: output.trim()}
              - {type: levenshtein, value: x, threshold: -2}
            threshold: 2
        """,
    )
    with pytest.raises(ImportFailed) as info:
        load_promptfoo(path)
    problems = [p.removeprefix(f"{path}:") for p in info.value.problems]
    assert problems == [
        "11: scenarios: not supported by the promptfoo importer",
        "5: prompts[3]: file://missing.txt: no such file",
        "6: prompts[4]: file://prompt.py: scripts are not supported",
        "8: providers[0]: unsupported provider 'ollama:chat:llama3' (trialkit maps "
        "openai:MODEL, openai:chat:MODEL, anthropic:messages:MODEL and echo); pass a model to "
        "the importer (--model) to run these tests on another model",
        "9: providers[1].config.apiBaseUrl: not supported (trialkit maps temperature, "
        "max_tokens, top_p, seed, stop)",
        "15: tests[0].repeat: not supported by the promptfoo importer",
        "14: tests[0].options.transform: not supported by the promptfoo importer",
        "17: tests[0].assert[0].value: contains: expected a non-empty string, got None",
        "18: tests[0].assert[1].value: matches: pattern: invalid regular expression: missing ), "
        "unterminated subpattern at position 0",
        "19: tests[0].assert[2].weight: expected a number >= 0, got -1",
        "20: tests[0].assert[3]: unsupported keys: transform (they change the check)",
        "21: tests[0].assert[4].value: levenshtein: threshold must be a number >= 0, got -2",
        "22: tests[0].threshold: expected a number from 0 to 1, got 2",
        "2: prompts[0]: {{ name | upper }}: only plain variables are rendered (no Nunjucks "
        "filters or expressions)",
        "3: prompts[1]: uses Nunjucks tags ({% ... %} or {# ... #}), which are not rendered",
        "4: prompts[2]: {{ nobody }}: no such var (vars of tests[0])",
    ]
    assert "secret" not in str(info.value)  # an API key in the config is never repeated


def test_bad_yaml_and_shapes(tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match=r"promptfooconfig.yaml:2: invalid YAML"):
        load_promptfoo(_config(tmp_path, "prompts: [a\ntests: ]\n"))
    with pytest.raises(
        ImportFailed, match=r"expected a promptfoo config \(a mapping\), got a list"
    ):
        load_promptfoo(_config(tmp_path, "- a\n"))
    with pytest.raises(ImportFailed, match="prompts: missing"):
        load_promptfoo(_config(tmp_path, "tests: []\n"))


def test_no_tests_runs_each_prompt_once(tmp_path: Path) -> None:
    suite = load_promptfoo(_config(tmp_path, "prompts: [Hello]\nproviders: [echo]\n"))
    assert [(t.id, t.input, t.graders) for t in suite.tasks] == [("test-1", "Hello", [])]
    assert suite.model == "scripted/echo"
