"""Exporters: trials out to files and tracing back ends.

`OtelExporter` and `LangfuseExporter` need the OpenTelemetry SDK (`pip install 'trialkit[otel]'`),
imported only when one is made.
"""

from trialkit.exporters.base import Exporter
from trialkit.exporters.jsonl import JsonlExporter
from trialkit.exporters.langfuse import LangfuseExporter
from trialkit.exporters.otel import OtelExporter

__all__ = ["Exporter", "JsonlExporter", "LangfuseExporter", "OtelExporter"]
