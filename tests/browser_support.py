"""Debian's Chromium for the browser tests (tests/conftest.py's ``headless_chromium`` fixture) and their
screenshots, which are how the images in docs/img/ are made."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def save_screenshot(page: Any, env_var: str, name: str, tmp_path: Path) -> Path:
    """Screenshot ``page`` (its full length) as ``NAME.png`` into the directory ``$ENV_VAR`` names, else into
    ``tmp_path``: the screenshot is taken either way, so a page that cannot be captured fails the test."""
    target = os.environ.get(env_var)
    directory = Path(target) if target else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
