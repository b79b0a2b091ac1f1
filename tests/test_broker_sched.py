"""klog.event.loop.slice.us: the event-loop thread asks the scheduler for a shorter slice (Linux 6.12+)."""

from __future__ import annotations

import ctypes
import os
import platform

import pytest

import klog
from klog.broker.config import BrokerConfig, ConfigError
from klog.broker.sched import request_slice

pytestmark = pytest.mark.timeout(60)

_SYS_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}.get(platform.machine())


class _Attr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32), ("sched_flags", ctypes.c_uint64),
                ("sched_nice", ctypes.c_int32), ("sched_priority", ctypes.c_uint32),
                ("sched_runtime", ctypes.c_uint64), ("sched_deadline", ctypes.c_uint64),
                ("sched_period", ctypes.c_uint64)]


def slice_ns(tid: int) -> int:
    attr = _Attr()
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(_SYS_SCHED_GETATTR, tid, ctypes.byref(attr), ctypes.sizeof(_Attr), 0) == 0, \
        os.strerror(ctypes.get_errno())
    return attr.sched_runtime


def _kernel_has_custom_slices() -> bool:
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) >= (6, 12)


needs_slices = pytest.mark.skipif(platform.system() != "Linux" or _SYS_SCHED_GETATTR is None
                                  or not _kernel_has_custom_slices(),
                                  reason="custom EEVDF slices need Linux >= 6.12 on x86_64/aarch64")


@needs_slices
def test_event_loop_thread_gets_the_configured_slice_and_other_threads_keep_theirs():
    before = slice_ns(0)
    with klog.Broker(config={"klog.event.loop.slice.us": 250}) as broker:
        loop_tid = broker._thread.native_id
        assert slice_ns(loop_tid) == 250_000
        assert slice_ns(0) == before  # the caller's thread is untouched


@needs_slices
def test_default_leaves_the_kernel_slice_alone():
    with klog.Broker() as broker:
        assert slice_ns(broker._thread.native_id) == slice_ns(0)


def test_out_of_range_slices_are_refused_with_the_key_named():
    for bad in (50, 100_001, -1):
        with pytest.raises(ConfigError, match="klog.event.loop.slice.us"):
            BrokerConfig({"klog.event.loop.slice.us": bad})
    assert request_slice(10) is not None  # the helper refuses too, with a reason
