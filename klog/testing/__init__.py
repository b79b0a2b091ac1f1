"""Test helpers that klog ships for its own suite and for users' tests (see pytest_plugin)."""
