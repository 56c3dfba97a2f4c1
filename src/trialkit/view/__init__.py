"""The local web viewer of the store (`trialkit view`); needs the `view` extra."""

from trialkit.view.server import ViewServer

__all__ = ["ViewServer"]
