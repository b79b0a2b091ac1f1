"""The native core of klog (Rust, built by maturin), re-exported from ``klog._native._core``.

Everything on the hot path lives here: the record batch codec, CRC-32C, the partition log.
Type stubs ship beside it in ``_core.pyi``.
"""

from klog._native._core import *  # noqa: F401,F403
from klog._native._core import __version__, CorruptRecordError  # noqa: F401
