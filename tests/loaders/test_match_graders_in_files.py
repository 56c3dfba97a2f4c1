from pathlib import Path

from trialkit import run_sync
from trialkit.loaders import load_suite_file, validate_suite_file

SUITE = """id: m
model: scripted/echo
tasks:
  - id: good
    input: Paris is big
    graders:
      - starts_with: [Paris, Lyon]
      - contains_any: {texts: [big, small]}
      - contains_all: [paris, big]
      - fuzzy_match: paris is big!
      - levenshtein: {expected: Paris is bog, max_distance: 1}
  - id: bad
    input: Rome
    graders:
      - starts_with: {texts: rome, case_sensitive: true}
"""


def test_the_importers_graders_are_available_by_short_name(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    report = run_sync(load_suite_file(tmp_path))
    assert report.task("good").verdict == "pass"
    assert report.task("good").results[0].scores[0].name.startswith("starts_with")
    assert report.task("bad").verdict == "fail"


def test_bad_arguments_are_problems(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "id: m\nmodel: scripted/echo\ntasks:\n  - id: a\n    input: x\n    graders:\n"
        "      - levenshtein: {expected: x, max_distance: -1}\n"
    )
    (problem,) = validate_suite_file(tmp_path)
    assert problem.line == 7
    assert "max_distance" in str(problem)


AGENT_SUITE = """id: agent
harness: {python: "agent:work"}
tasks:
  - id: t
    input: go
    graders:
      - tool_called: {name: search, args: {q: go}}
      - tool_not_called: delete
      - tool_order: [search, write]
      - max_tool_calls: 2
      - max_tool_calls: {n: 1, name: search}
      - max_turns: 3
      - no_tool_errors:
"""

AGENT = """
from trialkit import Reply, ToolCall

def work(prompt):
    return Reply(output="done", tool_calls=[
        ToolCall(id="1", name="search", arguments={"q": prompt}, result="found"),
        ToolCall(id="2", name="write", arguments={"path": "x"}, result="ok"),
    ])
"""


def test_the_agent_graders_by_short_name(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(AGENT_SUITE)
    (tmp_path / "agent.py").write_text(AGENT)
    report = run_sync(load_suite_file(tmp_path))
    scores = report.tasks[0].results[0].scores
    assert [s.verdict for s in scores] == ["pass"] * 7, [(s.name, s.rationale) for s in scores]


WORKSPACE_SUITE = """id: ws
harness: {python: "writer:write"}
environment: {workspace: fixtures/notes}
tasks:
  - id: t
    input: hello
    graders:
      - file_contains: {path: inbox.md, text: hello}
      - only_changed: ["*.md"]
      - unchanged: [index.md]
"""

WRITER = """
from pathlib import Path

def write(prompt, ctx):
    (Path(ctx.world.path) / "inbox.md").write_text(prompt)
    return "filed"
"""


def test_a_workspace_environment_from_a_suite_file(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(WORKSPACE_SUITE)
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "fixtures" / "notes").mkdir(parents=True)
    (tmp_path / "fixtures" / "notes" / "index.md").write_text("# Index\n")
    report = run_sync(load_suite_file(tmp_path))
    result = report.tasks[0].results[0]
    assert result.verdict == "pass", [(s.name, s.rationale) for s in result.scores]
