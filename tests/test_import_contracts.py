"""klog's floors are executable: lint-imports checks the contracts in .importlinter (each floor imports only the
ones below it, the controller never imports the broker, Spark speaks Kafka only through klog.client, no import cycles
inside a package), so a wrong arrow fails the suite instead of waiting for a review."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lint_imports() -> str:
    found = Path(sys.executable).with_name("lint-imports")
    return str(found) if found.exists() else shutil.which("lint-imports") or "lint-imports"


def test_every_import_contract_is_kept() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    checked = subprocess.run([lint_imports(), "--no-cache", str(ROOT / ".importlinter")], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=240)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout, checked.stdout
