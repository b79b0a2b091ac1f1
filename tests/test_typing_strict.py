"""The request handlers and the controller type-check under ``mypy --strict``: handlers against the broker state
they read (klog.broker.handlers.context.HandlerBroker) and the generated request/response types
(klog.protocol.message_types), the controller's decisions against the same types. Any error fails the suite.

Other modules count as checked by their own (non-strict) settings in pyproject.toml (tests/test_packaging.py runs
mypy over the whole package, which also applies the strict flags pyproject.toml sets for these two packages); here
their own errors are not reported (``--follow-imports=silent``) but their types are still what the strict packages
are checked against. About 5-10 s with a fresh cache on 2 cores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STRICT_PACKAGES = ("klog.broker.handlers", "klog.controller", "klog.protocol.message_types")


def test_handlers_and_controller_pass_mypy_strict(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--config-file",
            str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "mypy-cache")]
    for package in STRICT_PACKAGES:
        args += ["-m" if package.endswith("message_types") else "-p", package]
    result = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout
