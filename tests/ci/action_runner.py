"""Runs the composite action in `action.yml` the way a GitHub runner does, on this machine.

Each `run:` step is a bash script (GitHub runs `shell: bash` as `bash --noprofile --norc -eo
pipefail {0}`) with `${{ ... }}` expressions substituted, the step's `env:`, and a fresh
`$GITHUB_OUTPUT` file whose `name=value` lines become `steps.<id>.outputs`. `if:` is evaluated
for the forms the action uses (`always()`, `X != ''`, `&&`); a step without one runs only while
every step before it succeeded. `uses:` steps are not run, only returned for checking.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_COMPARISON = re.compile(r"^(.+?)\s*(==|!=)\s*'(.*)'$")


def load_action() -> dict[str, Any]:
    data = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@dataclass
class StepResult:
    name: str
    id: str | None
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]


@dataclass
class ActionResult:
    steps: list[StepResult] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """The `uses:` steps (and steps whose `if:` was false), not run."""
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(step.code != 0 for step in self.steps)

    @property
    def exit_code(self) -> int:
        codes = [step.code for step in self.steps if step.code != 0]
        return codes[-1] if codes else 0

    def step(self, name_or_id: str) -> StepResult:
        return next(s for s in self.steps if name_or_id in (s.id, s.name))

    @property
    def text(self) -> str:
        """Everything the steps printed."""
        return "\n".join(part for s in self.steps for part in (s.stdout, s.stderr))


class _Context:
    def __init__(self, action: dict[str, Any], inputs: dict[str, str], github: dict[str, str]):
        self.action = action
        self.inputs = inputs
        self.github = github
        self.steps: dict[str, dict[str, str]] = {}

    def value(self, expression: str) -> str:
        expression = expression.strip()
        if expression.startswith("inputs."):
            name = expression.removeprefix("inputs.")
            declared = self.action["inputs"]
            assert name in declared, f"the action has no input {name!r}"
            if name in self.inputs:
                return self.inputs[name]
            return self.substitute(str(declared[name].get("default", "")))
        if expression.startswith("github."):
            name = expression.removeprefix("github.")
            assert name in self.github, f"no test value for github.{name}"
            return self.github[name]
        match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
        if match:
            return self.steps.get(match[1], {}).get(match[2], "")
        raise AssertionError(f"unsupported expression: {expression}")

    def substitute(self, text: str) -> str:
        return _EXPRESSION.sub(lambda m: self.value(m[1]), text)

    def condition(self, condition: str | None, failed: bool) -> bool:
        if condition is None:
            return not failed
        condition = _EXPRESSION.sub(lambda m: m[1], condition)
        result = True
        for term in (t.strip() for t in condition.split("&&")):
            if term == "always()":
                continue
            match = _COMPARISON.match(term)
            assert match, f"unsupported condition: {term}"
            left, op, right = match.groups()
            equal = self.value(left) == right
            result = result and (equal if op == "==" else not equal)
        return result


def run_action(
    inputs: dict[str, str],
    *,
    workspace: Path,
    env: dict[str, str],
    github: dict[str, str],
    timeout: float = 300,
) -> ActionResult:
    """Run the action's steps in `workspace` with `env` (the runner's variables, PATH...)."""
    action = load_action()
    assert action["runs"]["using"] == "composite"
    ctx = _Context(action, inputs, github)
    result = ActionResult()
    for number, step in enumerate(action["runs"]["steps"]):
        if not ctx.condition(step.get("if"), result.failed) or "uses" in step:
            result.skipped.append(step)
            continue
        assert step.get("shell") == "bash", f"step {step.get('name')}: shell must be bash"
        script = workspace / f".step-{number}.sh"
        script.write_text(ctx.substitute(step["run"]), encoding="utf-8")
        outputs = workspace / f".step-{number}.outputs"
        outputs.write_text("", encoding="utf-8")
        step_env = {k: ctx.substitute(str(v)) for k, v in (step.get("env") or {}).items()}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env={**env, **step_env, "GITHUB_OUTPUT": str(outputs)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        values = dict(
            line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line
        )
        if step.get("id"):
            ctx.steps[step["id"]] = values
        result.steps.append(
            StepResult(
                step.get("name", ""),
                step.get("id"),
                done.returncode,
                done.stdout,
                done.stderr,
                values,
            )
        )
    result.outputs = {
        name: ctx.substitute(str(spec["value"])) for name, spec in action["outputs"].items()
    }
    return result


def runner_env(workspace: Path, fake_bin: Path, **more: str) -> dict[str, str]:
    """The variables a GitHub runner sets (those the action and trialkit read)."""
    path = os.pathsep.join([str(fake_bin), os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    return {
        "PATH": path,
        "HOME": str(workspace.parent / "home"),
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_REPOSITORY": "octo/evals",
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
        "GITHUB_EVENT_NAME": "pull_request",
        "NO_COLOR": "1",
        **more,
    }
