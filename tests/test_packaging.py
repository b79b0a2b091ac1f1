"""The package installs as users get it: native core importable, stubs and py.typed shipped."""

import os
import pathlib
import subprocess
import sys

import klog
import klog._native

ALLOWLIST = pathlib.Path(__file__).parent / "stubtest-allowlist.txt"


def test_tests_run_against_the_installed_wheel_when_ci_says_so():
    if os.environ.get("KLOG_EXPECT_INSTALLED") != "1":
        return
    location = pathlib.Path(klog.__file__).resolve()
    assert "site-packages" in location.parts, f"klog imported from the source tree: {location}"


def test_native_core_version_matches_package():
    assert klog._native.__version__ == klog.__version__


def test_wheel_ships_stubs_and_py_typed():
    pkg = pathlib.Path(klog.__file__).parent
    assert (pkg / "py.typed").is_file()
    assert (pkg / "_native" / "_core.pyi").is_file()
    assert (pkg / "_native" / "py.typed").is_file()


def assert_mypy_module_passes(module: str, *args: str, cwd: pathlib.Path) -> None:
    """Runs ``python -m <module> <args>`` (mypy or one of its tools) and fails with its report on any error."""
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=240,
                            cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr


def test_stubs_match_the_native_module(tmp_path):
    # stubtest imports the real extension and compares every name and signature with _core.pyi.
    # Run from an empty directory so `-m` does not put a source tree's klog/ first on sys.path.
    assert_mypy_module_passes("mypy.stubtest", "klog._native._core", "--allowlist", str(ALLOWLIST), cwd=tmp_path)


def test_klog_package_type_checks_clean_under_mypy(tmp_path):
    # The [tool.mypy] settings in pyproject.toml, over the whole klog package: any error fails, so typing
    # mistakes (and the real bugs they hide) are caught when they are made. A fresh cache keeps runs independent.
    root = pathlib.Path(__file__).resolve().parent.parent
    assert_mypy_module_passes("mypy", "--config-file", str(root / "pyproject.toml"), "--cache-dir",
                              str(tmp_path / "mypy-cache"), "--no-error-summary", str(root / "klog"), cwd=root)


def test_cibuildwheel_builds_every_platform_we_promise():
    expected = {
        "linux": {"cp310-manylinux_x86_64", "cp310-manylinux_aarch64", "cp310-musllinux_x86_64", "cp310-musllinux_aarch64"},
        "macos": {"cp310-macosx_x86_64", "cp310-macosx_arm64"},
        "windows": {"cp310-win_amd64"},
    }
    root = pathlib.Path(__file__).resolve().parent.parent
    for platform, identifiers in expected.items():
        result = subprocess.run(
            [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", platform, str(root)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert set(result.stdout.split()) == identifiers, (platform, result.stdout)
