"""Environments: the world a trial runs in."""

from trialkit.environments.base import NO_ENVIRONMENT, Environment
from trialkit.environments.workspace import Workspace, WorkspaceError, WorkspaceWorld

__all__ = ["NO_ENVIRONMENT", "Environment", "Workspace", "WorkspaceError", "WorkspaceWorld"]
