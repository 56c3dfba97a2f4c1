"""`SubprocessAgent.claude_code()` and `SubprocessAgent.codex()`: the two command-line agents
people use, set up to talk only to trialkit's model proxy and to work unattended in the
trial's workspace.

What each sets is in `docs/guide.md` ("Claude Code and Codex"): the command, the output format,
an empty home folder per trial, the switches that keep the agent off other hosts, a fixed time
zone and shell (so a cassette recorded on one machine replays on another), and how a later turn
resumes the session.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trialkit.harness._runs_from import runs_from

if TYPE_CHECKING:
    from trialkit.harness.subprocess import SubprocessAgent
    from trialkit.harness.tools import Tool

AGENT_TIMEZONE = "Etc/UTC"
"""The `TZ` the presets give an agent unless `env` says otherwise: the date and zone in its
prompt are then the same on every machine (they are normalised in cassette keys as well)."""

CLAUDE_CODE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # else it calls Anthropic's host directly
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}
CLAUDE_CODE_PERMISSION_MODES = ("acceptEdits", "bypassPermissions", "default", "dontAsk", "plan")


def claude_code_agent(
    cls: type[SubprocessAgent],
    *,
    model: str | None = None,
    allowed_tools: Sequence[str] | None = None,
    args: Sequence[str] = (),
    permission_mode: str = "acceptEdits",
    executable: str = "claude",
    upstream: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    tools: Sequence[Callable[..., Any] | Tool] = (),
) -> SubprocessAgent:
    """Claude Code in print mode (`claude -p`, stream-JSON), once per user turn, resuming its
    session on later turns. `model` is its `--model` (its own default when `None`),
    `allowed_tools` its `--allowed-tools` (`mcp__trialkit` is added when `tools` are served),
    `args` more arguments, `permission_mode` its `--permission-mode` (`acceptEdits` lets it
    edit the workspace without asking), `upstream` where the proxy sends its calls (default:
    `ANTHROPIC_BASE_URL` from trialkit's environment, else Anthropic's host)."""
    if permission_mode not in CLAUDE_CODE_PERMISSION_MODES:
        choices = ", ".join(CLAUDE_CODE_PERMISSION_MODES)
        raise ValueError(f"permission_mode: one of {choices}, got {permission_mode!r}")
    command = [executable, "-p", "--output-format", "stream-json", "--verbose"]
    command += ["--permission-mode", permission_mode]
    if model:
        command += ["--model", model]
    if tools:
        command += ["--mcp-config", "{mcp_config}"]
    if allowed_tools is not None:
        allowed = [*allowed_tools, *(["mcp__trialkit"] if tools else [])]
        command.append("--allowed-tools=" + ",".join(allowed))
    command += list(args)
    # IS_SANDBOX=1 (which Claude Code needs to skip permissions as root) is set by the agent's
    # session only inside a sandbox that isolates (`in_sandbox`): never a claim that is false
    settings = {**CLAUDE_CODE_ENV, "TZ": AGENT_TIMEZONE, "SHELL": _shell()}
    # its temp folder (`claude-<uid>`, made in the system's /tmp by default) in its own home
    settings["CLAUDE_CODE_TMPDIR"] = "{home}/tmp"
    agent = cls(
        command,
        env={**settings, **(env or {})},
        timeout=timeout,
        tools=tools,
        output="stream-json",
        stdin=True,  # the prompt on stdin: one that starts with "-" is no option
        continue_args=["--resume", "{session_id}"],
        upstream={"anthropic": upstream} if upstream else None,
        home=True,
        files={"tmp/.trialkit": ""},
        name="claude-code",
    )
    agent.runs_from = runs_from(executable)[1]  # npm's node_modules, outside /usr: bound in
    return agent


CODEX_CONFIG = """\
# written by trialkit for one trial: its model calls go to trialkit's model proxy
model_provider = "trialkit"
{model_line}
[model_providers.trialkit]
name = "trialkit"
base_url = "{{openai_base_url}}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[features]
plugins = false

[analytics]
enabled = false

[sandbox_workspace_write]
exclude_tmpdir_env_var = true
exclude_slash_tmp = true
{mcp}"""
CODEX_MCP = """
[mcp_servers.trialkit]
url = "{mcp_url}"
"""
CODEX_VOLATILE = (
    (r"Wall time: \d+(?:\.\d+)? seconds", "Wall time: {{trialkit.duration}} seconds"),
    (r"Chunk ID: [0-9A-Za-z]+", "Chunk ID: {{trialkit.chunk_id}}"),
)
"""What Codex writes in the outputs of the tools it runs that changes from run to run."""
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")


def codex_agent(
    cls: type[SubprocessAgent],
    *,
    model: str | None = None,
    args: Sequence[str] = (),
    sandbox: str = "workspace-write",
    executable: str = "codex",
    upstream: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    tools: Sequence[Callable[..., Any] | Tool] = (),
) -> SubprocessAgent:
    """Codex (`codex exec --json`), once per user turn, resuming its session on later turns,
    with a home of its own (`CODEX_HOME`) whose `config.toml` names trialkit's proxy as its
    provider on the Responses wire API, plugins and analytics off. `model` is its model (its
    own default when `None`), `sandbox` its `-s` policy (`workspace-write` lets it edit the
    workspace), `args` more arguments (before the prompt), `upstream` where the proxy sends its
    calls (default: `OPENAI_BASE_URL` from trialkit's environment, else OpenAI's host, with
    the `/v1`)."""
    if sandbox not in CODEX_SANDBOXES:
        raise ValueError(f"sandbox: one of {', '.join(CODEX_SANDBOXES)}, got {sandbox!r}")
    model_line = f"model = {json.dumps(model)}" if model else ""
    config = CODEX_CONFIG.format(model_line=model_line, mcp=CODEX_MCP if tools else "")
    command = [executable, "exec", "--json", "--skip-git-repo-check", "-s", sandbox, *args]
    settings = {"CODEX_HOME": "{home}", "TZ": AGENT_TIMEZONE, "SHELL": _shell()}
    # a TMPDIR of its own, in its home: Codex refuses to set up its own sandbox's helper (and
    # so fails every file edit) when CODEX_HOME is under TMPDIR, as trialkit's home is in /tmp.
    # It is left out of the writable roots named to the model (exclude_tmpdir_env_var), whose
    # order would follow the random names of the home and the workspace. /tmp is left out too
    # (exclude_slash_tmp): Codex's sandbox makes empty .git, .codex and .agents folders in
    # every writable root, and a /tmp/.git it fails to remove makes the next agent whose
    # workspace is under /tmp believe it is in a git repository. The workspace alone is writable
    settings["TMPDIR"] = "{home}/tmp"
    agent = cls(
        command,
        env={**settings, **(env or {})},
        timeout=timeout,
        tools=tools,
        output="stream-json",
        continue_args=["resume", "{session_id}"],  # stdin stays closed: Codex waits on it
        upstream={"openai": upstream} if upstream else None,
        home=True,
        files={"config.toml": config, "tmp/.trialkit": ""},
        volatile=CODEX_VOLATILE,
        name="codex",
    )
    agent.runs_from = runs_from(executable)[1]  # its package and node (bin/codex.js)
    if sandbox == "workspace-write":
        # Codex's own sandbox (its bubblewrap) cannot be nested in one that isolates: there,
        # trialkit's sandbox keeps it to the workspace, HOME and /tmp, as workspace-write would
        agent.boxed_command = [*command[:5], "danger-full-access", *command[6:]]
    return agent


def _shell() -> str:
    """The shell named to the agent, the same on every machine that has it."""
    return "/bin/bash" if shutil.which("bash", path="/bin") else "/bin/sh"
