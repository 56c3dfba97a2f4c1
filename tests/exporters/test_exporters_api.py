"""The exporters' public names, and that importing them stays light."""

from __future__ import annotations

import subprocess
import sys

import trialkit.exporters


def test_exports() -> None:
    assert sorted(trialkit.exporters.__all__) == [
        "Exporter",
        "JsonlExporter",
        "LangfuseExporter",
        "OtelExporter",
    ]


def test_importing_the_exporters_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, trialkit.exporters; "
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
