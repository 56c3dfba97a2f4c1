"""Exporters: trials out to files and tracing back ends."""

from trialkit.exporters.base import Exporter

__all__ = ["Exporter"]
