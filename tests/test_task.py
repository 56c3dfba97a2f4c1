import pytest

from trialkit import Message, Suite, SuiteError, SuiteKind, Task, Turns


def test_task_input_forms_are_normalised() -> None:
    text = Task(id="t", input="hello")
    chat = Task(
        id="c",
        input=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    )
    turns = Task(id="m", input=Turns("first", [{"role": "user", "content": "second"}]))
    assert text.turns == ["hello"]
    assert chat.input == [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Hi"),
    ]
    assert chat.prompt == "Hi"
    assert turns.turns == ["first", [Message(role="user", content="second")]]
    assert turns.prompt == "first"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id": ""}, "task: id: must be a non-empty string"),
        ({"id": "a/b"}, "task 'a/b': id: must not contain"),
        ({"input": 3}, "task 't': input: expected a string, a list of chat messages or Turns"),
        ({"input": []}, "task 't': input: an empty list of messages"),
        ({"input": [{"role": "robot", "content": "x"}]}, "role"),
        ({"expect": "maybe"}, "task 't': expect: must be 'success' or 'failure'"),
        ({"trials": 0}, "task 't': trials: must be a whole number from 1 to 10,000"),
        ({"timeout": 0}, "task 't': timeout: must be a number of seconds > 0"),
        ({"kind": "mixed"}, "task 't': kind: a task is 'capability' or 'regression'"),
        ({"kind": "weekly"}, "task 't': kind: must be 'capability' or 'regression'"),
    ],
)
def test_bad_tasks_name_the_field(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"id": "t", "input": "x", **kwargs}
    with pytest.raises((SuiteError, ValueError)) as info:
        Task(**args)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_suite_validation() -> None:
    with pytest.raises(SuiteError, match="duplicate task id 'a'"):
        Suite(id="s", tasks=[Task(id="a", input="x"), Task(id="a", input="y")])
    with pytest.raises(SuiteError, match="kind: must be 'capability', 'regression' or 'mixed'"):
        Suite(id="s", kind="nightly", tasks=[])  # type: ignore[arg-type]
    with pytest.raises(SuiteError, match="task 'a': kind: a task in a mixed suite needs"):
        Suite(id="s", kind="mixed", tasks=[Task(id="a", input="x")])
    with pytest.raises(SuiteError, match="trials: must be a whole number from 1 to"):
        Suite(id="s", trials=0, tasks=[])


def test_overrides_and_selection() -> None:
    a = Task(id="alpha", input="x", trials=5, timeout=2, tags=["fast"], kind="capability")
    b = Task(id="beta", input="x", kind="regression")
    suite = Suite(
        id="s",
        kind="mixed",
        trials=3,
        tasks=[a, Task(id="gamma", input="y", kind="capability", tags=["fast"]), b],
    )
    assert suite.trials_for(a) == 5
    assert suite.trials_for(b) == 3
    assert suite.trials_for(a, override=1) == 1
    assert suite.timeout_for(a) == 2
    assert suite.timeout_for(b) == 60
    assert suite.task_kind(b) is SuiteKind.REGRESSION
    assert [t.id for t in suite.select(task_ids=["*a"])] == ["alpha", "gamma", "beta"]
    assert [t.id for t in suite.select(task_ids=["al*"])] == ["alpha"]
    assert [t.id for t in suite.select(tags=["fast"])] == ["alpha", "gamma"]
    assert suite.select(task_ids=["nope"]) == []
