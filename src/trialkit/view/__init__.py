"""The local web viewer of the store (`trialkit view`)."""

from trialkit.view.server import ViewServer

__all__ = ["ViewServer"]
