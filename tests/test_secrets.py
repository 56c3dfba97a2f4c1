"""`trialkit.secrets`: which values are secrets, how they are redacted, and the choke points
(ErrorInfo, model calls, store rows, the JSONL exporter, the command line's output)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import hypothesis
import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from trialkit import Reply, Score, Suite, Task, grader, run_sync, secrets
from trialkit._record import ErrorInfo
from trialkit.exporters.base import Exporter
from trialkit.exporters.jsonl import JsonlExporter
from trialkit.models import ModelRequest, ScriptedModel, get_model
from trialkit.secrets import (
    REDACTED,
    known_secrets,
    redact,
    redact_data,
    redact_json,
    redact_record,
    register_client,
    register_secret,
)
from trialkit.transcript import Message
from trialkit.trial import Trial

KEY = "sk-unit-Secret-0123456789"


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "LANGFUSE_SECRET_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "my_apikey",
        "AWS_SECRET_ACCESS_KEY",
        "SERVICE_SECRET",
    ],
)
def test_credential_named_variables_are_secrets(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "value-of-" + name)
    assert "value-of-" + name in known_secrets()
    assert redact(f"got value-of-{name}!") == f"got {REDACTED}!"


@pytest.mark.parametrize(
    "name", ["PWD", "HOME", "PATH", "OPENAI_BASE_URL", "TOKEN_FILE", "KEYBOARD_LAYOUT"]
)
def test_other_variables_are_not(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "/some/ordinary/value")
    assert redact("/some/ordinary/value") == "/some/ordinary/value"


def test_the_environment_is_followed_as_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`known_secrets` answers from a copy while nothing changed: a value replaced by another
    of the same length, a variable removed, and a secret registered are all seen at once."""
    monkeypatch.setenv("DEPLOY_TOKEN", "first-token-value-0001")
    assert "first-token-value-0001" in known_secrets()
    assert known_secrets() is known_secrets()  # nothing changed: the same answer
    monkeypatch.setenv("DEPLOY_TOKEN", "other-token-value-0002")
    assert "other-token-value-0002" in known_secrets()
    assert "first-token-value-0001" not in known_secrets()
    monkeypatch.delenv("DEPLOY_TOKEN")
    assert "other-token-value-0002" not in known_secrets()
    register_secret("registered-late-value-0003")
    assert "registered-late-value-0003" in known_secrets()
    assert redact("x registered-late-value-0003 y") == f"x {REDACTED} y"


def test_short_values_are_not_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAG_TOKEN", "true")
    assert redact("true or false") == "true or false"


def test_registered_values_and_clients() -> None:
    register_secret("Bearer reg-token-0123456789", "short", None, 42)
    assert redact("token reg-token-0123456789.") == f"token {REDACTED}."
    assert "Bearer" not in known_secrets()
    assert "short" not in known_secrets()

    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

    register_client(AsyncAnthropic(auth_token="anthropic-auth-token-42", api_key=None))
    register_client(
        AsyncOpenAI(api_key="openai-client-key-42", default_headers={"x-api-key": "hdr-key-4242"})
    )
    text = "anthropic-auth-token-42 openai-client-key-42 hdr-key-4242"
    assert redact(text) == " ".join([REDACTED] * 3)


def test_header_like_tokens_are_redacted_whatever_their_source() -> None:
    text = (
        "Authorization: Bearer abcdefghijklmnop1234 and {'x-api-key': 'zyxwvutsrq'} "
        "and api-key=qwertyuiop"
    )
    assert redact(text) == (
        f"Authorization: Bearer {REDACTED} and {{'x-api-key': '{REDACTED}'}} and api-key={REDACTED}"
    )
    ordinary = "Basic arithmetic, bearer bonds, a Bearer of news and the api-key docs"
    assert redact(ordinary) == ordinary


@pytest.mark.parametrize(
    "secret", ['quote"inside-0123', "back\\slash-0123", "ünïcode-sëcret", "plain-0123456789"]
)
def test_redact_json_keeps_json_valid(secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODD_API_KEY", secret)
    data = {"a": f"x {secret} y", secret: [1, 2.5, None, True, {"b": secret}], "tab": "\t" + secret}
    text = json.dumps(data, ensure_ascii=False)
    redacted = redact_json(text)
    assert secret not in redacted and json.dumps(secret)[1:-1] not in redacted
    assert json.loads(redacted) == {
        "a": f"x {REDACTED} y",
        REDACTED: [1, 2.5, None, True, {"b": REDACTED}],
        "tab": "\t" + REDACTED,
    }
    assert json.loads(redacted) == redact_data(data)


def test_redact_json_of_a_secret_that_starts_like_an_escape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "\\toolong..." in JSON text is a tab then "oolong...": not the secret "toolong...".
    monkeypatch.setenv("TEA_TOKEN", "toolong-secret-42")
    text = json.dumps({"s": "\toolong-secret-4", "t": "toolong-secret-42"})
    assert json.loads(redact_json(text)) == {"s": "\toolong-secret-4", "t": REDACTED}


def test_nothing_to_redact_leaves_json_text_as_it_is() -> None:
    text = '{"a": 1,  "b": "x"}'
    assert redact_json(text) is text


def test_error_info_is_redacted_however_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", KEY)

    async def failed() -> ErrorInfo:  # as in a trial: on the event loop
        try:
            raise RuntimeError(f"401: invalid key {KEY}")
        except RuntimeError as exc:
            return ErrorInfo.from_exception(exc)

    error = anyio.run(failed)
    assert error.message == f"401: invalid key {REDACTED}"
    assert error.traceback is not None and KEY not in error.traceback
    assert ErrorInfo(type="X", message=KEY).message == REDACTED
    assert ErrorInfo.model_validate_json(json.dumps({"type": "X", "message": KEY})).message == (
        REDACTED
    )


def test_model_errors_and_recorded_calls_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key in a model's error and in its answer, a harness's output and a grader's
    rationale: none reaches the report, the store or the JSONL trace."""
    monkeypatch.setenv("ACME_API_KEY", KEY)
    failing = get_model(ScriptedModel("failing", [PermissionError(f"invalid key {KEY}")]))
    echoing = get_model(ScriptedModel("echoing", [f"your key is {KEY}"]))

    async def agent(prompt: str) -> Reply:
        model = failing if prompt == "fail" else echoing
        answer = await model.generate(ModelRequest(messages=[Message(role="user", content="k")]))
        return Reply(output=f"{answer.text} (and {KEY})")

    @grader
    def explains(ctx: object) -> Score:
        return Score(name="explains", value=1.0, rationale=f"saw {KEY}")

    suite = Suite(
        id="secrets",
        harness=agent,
        tasks=[
            Task(id="error", input="fail"),
            Task(id="leak", input="x", graders=[explains]),
        ],
    )
    store = tmp_path / "store.db"
    trace = tmp_path / "trace.jsonl"
    captured: list[Trial] = []

    class Capture(Exporter):
        def on_trial(self, trial: Trial) -> None:
            captured.append(trial)

    report = run_sync(
        suite,
        store=str(store),
        exporters=[JsonlExporter(str(trace), include_content=True), Capture()],
    )
    # Exporters get the trial as it is: each redacts what it sends (OTel: `redact_record`).
    leaky = next(t for t in captured if t.task_id == "leak")
    assert KEY in leaky.model_dump_json()
    clean = redact_record(leaky)
    assert isinstance(clean, Trial) and KEY not in clean.model_dump_json()
    assert clean.outcome.output == f"your key is {REDACTED} (and {REDACTED})"
    assert clean.transcript.model_calls[0].response is not None
    assert redact_record(clean) is clean
    error = report.task("error").results[0].error
    assert error is not None and "invalid key" in error.message and KEY not in error.message
    assert KEY not in report.model_dump_json()
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes(), path
    assert REDACTED in trace.read_text()
    with sqlite3.connect(store) as db:
        rows = db.execute("select output, error, scores from trials").fetchall()
    assert all(KEY not in str(value) for row in rows for value in row)
    assert any(REDACTED in str(value) for row in rows for value in row)


def test_the_command_line_redacts_what_it_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even what the code under test prints itself, and an error message."""
    from trialkit.cli.main import cli

    monkeypatch.setenv("ACME_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.py").write_text(
        "import os\n"
        "from trialkit import Suite, Task\n"
        "def agent(prompt):\n"
        "    print('the key is', os.environ['ACME_API_KEY'])\n"
        "    raise RuntimeError('refused: ' + os.environ['ACME_API_KEY'])\n"
        "suite = Suite(id='s', harness=agent, tasks=[Task(id='t', input='x')])\n"
    )
    result = CliRunner().invoke(
        cli, ["run", "suite.py", "--no-progress", "--store", str(tmp_path / "s.db")]
    )
    assert result.exit_code == 3, result.output
    assert "refused: " + REDACTED in result.stdout
    assert KEY not in result.stdout + result.stderr
    result = CliRunner().invoke(cli, ["report", KEY, "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert REDACTED in result.stderr and KEY not in result.stderr


def test_the_viewer_serves_no_secret_even_from_old_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import http.client

    from trialkit.store import Store
    from trialkit.view.server import ViewServer

    monkeypatch.setenv("ACME_API_KEY", KEY)
    path = tmp_path / "store.db"
    report = run_sync(
        Suite(id="s", harness=lambda p: "ok", tasks=[Task(id="t", input="x")]), store=str(path)
    )
    with sqlite3.connect(path) as db:  # as a trialkit that did not redact wrote it
        db.execute("update trials set output = ?", (f"old {KEY}",))
    run = report.run.id
    targets = (f"/runs/{run}", f"/runs/{run}/trials/t/0", f"/api/runs/{run}/trials/t/0")
    with Store(f"sqlite:///{path}") as store, ViewServer(store) as server:
        for target in targets:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", target)
            response = conn.getresponse()
            body = response.read().decode("utf-8")
            conn.close()
            assert response.status == 200, (target, body[:300])
            assert KEY not in body, target
            assert "trials" not in target or REDACTED in body, target


def test_a_store_password_is_a_secret_unless_it_is_a_name_beside_it() -> None:
    """CI's local PostgreSQL has user, password and database `trialkit`: hiding that password
    hides nothing, and redacting it would blank the product's name in every line."""
    from trialkit.store.engine import create_store_engine

    create_store_engine("postgresql+psycopg://trialkit:trialkit@127.0.0.1:9/trialkit").dispose()
    create_store_engine("postgresql+psycopg://user:pw-Store-0123456789@127.0.0.1:9/db").dispose()

    assert redact("trialkit run suite.py") == "trialkit run suite.py"
    assert "pw-Store-0123456789" in known_secrets()
    assert redact("login pw-Store-0123456789 failed") == f"login {REDACTED} failed"


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    st.text(alphabet=st.sampled_from(list("apikeyAPIKEY-: Bearer\u0130\u0131\u212ax")), max_size=40)
)
def test_the_quick_hint_finds_what_the_hint_regex_finds(text: str) -> None:
    # The word scan that stands in for `_HINT` (for speed) must agree with it on every text,
    # the case-blind letters outside ASCII (İ, ı, the Kelvin sign) included.
    assert secrets._hinted(text) == (secrets._HINT.search(text) is not None)


def test_a_header_token_spelled_with_a_kelvin_sign_is_still_redacted() -> None:
    token = "abcdefgh12345678"
    assert token not in redact(f"x-api-\u212aey: {token}")
    assert token not in redact(f"X-API-KEY={token} and more text")
