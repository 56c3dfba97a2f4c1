"""Environments: the world a trial runs in."""

from trialkit.environments.base import NO_ENVIRONMENT, Environment

__all__ = ["NO_ENVIRONMENT", "Environment"]
