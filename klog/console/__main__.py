"""``python -m klog.console ...`` is ``klog console ...`` (one parser: :mod:`klog.cli.console`)."""

from __future__ import annotations

import sys

from klog.cli import main

if __name__ == "__main__":
    sys.exit(main(["console", *sys.argv[1:]]))
