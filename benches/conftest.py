"""Collect ``benches/bench_*.py`` when pytest is pointed at the directory (``pytest benches``):
pytest's default ``python_files`` only matches ``test_*.py``."""

from __future__ import annotations

import pathlib

import pytest


def pytest_collect_file(file_path: pathlib.Path, parent: pytest.Collector) -> pytest.Module | None:
    # Files named on the command line are already collected by pytest's python plugin.
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
