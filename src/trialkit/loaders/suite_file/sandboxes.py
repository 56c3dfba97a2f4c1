"""The suite file's `sandbox:` key: the policy it asks for, checked against its provider
before any trial, and given to the command-line agent that runs in it, or else to the suite
(`Suite.sandbox`: a Python agent's and the graders' `ctx.sandbox`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from trialkit.loaders.suite_file.context import BuildContext
from trialkit.loaders.suite_file.models import SandboxSpec
from trialkit.sandbox.base import NetworkPolicy, SandboxError, SandboxPolicy

__all__ = ["put_in_sandbox"]

WHERE = ("sandbox",)


def put_in_sandbox(
    ctx: BuildContext, spec: str | SandboxSpec | None, base_dir: Path, harness: Any
) -> SandboxPolicy | None:
    """Run `harness` in the sandbox `spec` asks for: a `SubprocessAgent`'s turns run in it;
    for any other harness, the policy returned is the suite's (`Suite.sandbox`). A problem
    of the suite (one line, exit 2 before any trial) when the provider is unknown or
    missing, or it cannot enforce the policy."""
    if spec is None:
        return None
    from trialkit.harness.subprocess import SubprocessAgent
    from trialkit.sandbox.registry import load_provider

    name = spec if isinstance(spec, str) else spec.provider
    options = {} if isinstance(spec, str) else dict(spec.options)
    try:
        provider = load_provider(name, **options)
        policy = provider.default_policy()
        if isinstance(spec, SandboxSpec):
            policy = _asked(spec, policy, base_dir)
        if isinstance(harness, SubprocessAgent):
            harness.in_sandbox(policy, **options)
            return None
        provider.check(policy)
        return replace(policy, options=options)
    except (SandboxError, ValueError, TypeError) as exc:
        ctx.problem(WHERE, str(exc))
    return None


def _asked(spec: SandboxSpec, default: SandboxPolicy, base_dir: Path) -> SandboxPolicy:
    network = spec.network or default.network.mode
    grader = spec.grader_network or default.grader_network.mode
    limits = spec.limits.model_dump(exclude_none=True) if spec.limits else {}
    return replace(
        default,
        network=NetworkPolicy(network, allow=tuple(spec.allow) if network == "allowlist" else ()),
        grader_network=NetworkPolicy(grader),
        limits=replace(default.limits, **limits) if limits else default.limits,
        image=spec.image or default.image,
        dockerfile=(base_dir / spec.dockerfile) if spec.dockerfile else default.dockerfile,
        user=spec.user if spec.user is not None else default.user,
        env={**default.env, **spec.env},
    )
