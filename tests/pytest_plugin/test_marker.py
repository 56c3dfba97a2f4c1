"""`@pytest.mark.trialkit`: an ordinary test's body run as a trialkit task, trial by trial."""

from __future__ import annotations

import json

import pytest

from tests.pytest_plugin.conftest import default_store, stored_runs
from trialkit.store import Store, resolve_store_url

BOT_TESTS = """
import anyio.from_thread
import pytest

from trialkit import Message
from trialkit.models import ModelRequest, ScriptedModel, get_model

model = get_model(ScriptedModel("bot", lambda request, trial: f"answer {trial}"))


def request(text):
    return ModelRequest(messages=[Message(role="user", content=text)])


@pytest.mark.trialkit(trials=3)
def test_sync_body(trialkit_trial):
    reply = anyio.from_thread.run(model.generate, request("hello"))
    assert reply.text == f"answer {trialkit_trial.trial_index}"


@pytest.mark.trialkit(trials=4, kind="capability")
async def test_async_body(trialkit_trial):
    reply = await model.generate(request("hi"))
    assert reply.text == "answer 0"


@pytest.mark.trialkit(trials=2)
def test_fails(tmp_path):
    assert tmp_path.exists()
    assert 1 + 1 == 3, "arithmetic"


@pytest.mark.trialkit(trials=2)
def test_raises():
    raise KeyError("missing")


def test_plain():
    pass
"""


@pytest.fixture
def bot(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bot=BOT_TESTS)
    return pytester


def test_marked_tests_run_their_trials_and_follow_their_kind(bot: pytest.Pytester) -> None:
    result = bot.runpytest("-p", "no:cacheprovider", "-rA", "-v")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines_random(
        [
            "PASSED test_bot.py::test_sync_body",
            "PASSED test_bot.py::test_async_body",  # capability: one trial of four passed
            "PASSED test_bot.py::test_plain",
            "FAILED test_bot.py::test_fails - task 'test_fails' of suite 'test_bot': *",
            "ERROR test_bot.py::test_raises - task 'test_raises' of suite 'test_bot': *",
            "  trial 0: fail: agent_completed: the agent reported failure: AssertionError: "
            "arithmetic assert (1 + 1) == 3",
            "  trial 0: error: KeyError: 'missing'",
            "suite test_bot (mixed), run *",
            "    test_async_body (capability): pass, 1/4 trials passed, pass@1 0.25, pass@4 1.00, "
            "pass^4 0.00",
        ]
    )


def test_each_trial_has_its_own_transcript_in_the_stored_run(bot: pytest.Pytester) -> None:
    bot.runpytest("-p", "no:cacheprovider", "-k", "body")
    report = stored_runs(default_store(bot))["test_bot"]
    assert [(t.id, t.kind.value, t.trials, t.passed) for t in report.tasks] == [
        ("test_sync_body", "regression", 3, 3),
        ("test_async_body", "capability", 4, 1),
    ]
    url = resolve_store_url(str(default_store(bot)), create=False)
    with Store(url, create=False) as store:
        trials = [store.load_trial(report.run.id, "test_sync_body", i) for i in range(3)]
    answers = [
        [json.dumps(call.response) for call in trial.transcript.model_calls] for trial in trials
    ]
    assert [len(a) for a in answers] == [1, 1, 1]  # each trial's call, captured in its own
    assert all(f"answer {i}" in answers[i][0] for i in range(3))
    assert [t.index for t in trials] == [0, 1, 2]


def test_trials_of_a_marked_test_override(bot: pytest.Pytester) -> None:
    result = bot.runpytest(
        "-p", "no:cacheprovider", "-k", "test_sync_body", "--trialkit-trials", "5"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  1/1 tasks passed, pass rate 100.0% * over 5 trials*"])


def test_a_bad_marker_argument_is_an_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_odd="import pytest\n\n@pytest.mark.trialkit(trails=3)\ndef test_x():\n    pass\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*test_odd.py::test_x: @pytest.mark.trialkit: unknown argument trails*"]
    )


def test_the_trial_fixture_outside_a_marked_test_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_unmarked="def test_x(trialkit_trial):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the trialkit_trial fixture is for tests marked*"])


def test_skip_inside_a_marked_test_skips_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_skips="import pytest\n\n@pytest.mark.trialkit(trials=2)\n"
        "def test_x():\n    pytest.skip('not today')\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)


REPLAYED_TESTS = """
import os

import pytest

from trialkit import Message
from trialkit.models import ModelRequest, ScriptedModel, get_model


def answer(request, trial):
    if os.environ.get("BOT_BROKEN"):
        raise RuntimeError("the model must not be called")
    return f"answer {trial}"


model = get_model(ScriptedModel("bot", answer))


@pytest.mark.trialkit(trials=3)
async def test_answers(trialkit_trial):
    reply = await model.generate(ModelRequest(messages=[Message(role="user", content="hi")]))
    assert reply.text == f"answer {trialkit_trial.trial_index}"
"""


def test_a_marked_tests_calls_replay_trial_by_trial(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_replayed=REPLAYED_TESTS)
    cassette = ["-p", "no:cacheprovider", "--trialkit-cache", "cassette"]
    pytester.runpytest(*cassette, "--trialkit-cache-mode", "record").assert_outcomes(passed=1)
    monkeypatch.setenv("BOT_BROKEN", "1")
    replayed = pytester.runpytest(*cassette, "--trialkit-cache-mode", "replay")
    replayed.assert_outcomes(passed=1)  # trial i gets the answer trial i recorded
    live = pytester.runpytest("-p", "no:cacheprovider")
    live.assert_outcomes(errors=1)
    live.stdout.fnmatch_lines(
        ["  trial 0: error: ModelError: scripted/bot: the model must not be called"]
    )
