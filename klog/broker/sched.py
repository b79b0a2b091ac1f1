"""A shorter CPU time slice for the event-loop thread (Linux 6.12+ EEVDF), so it runs sooner after a wake-up.

All of klog's request handling runs on one thread. On a machine with more runnable threads than cores, every
wake-up of that thread (a request arrived, a long-poll was satisfied) waits for a CPU, and the whole broker
waits with it. EEVDF orders runnable threads by virtual deadline = eligible time + slice / weight: a thread
asking for a shorter slice (``sched_attr.sched_runtime`` of a SCHED_OTHER thread) gets earlier deadlines, so
it is picked, and may preempt, sooner; its CPU share is unchanged (that is set by nice/weight). No privilege
is needed. Older kernels accept and ignore the value.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

#: sched_setattr(2) system call numbers by machine (glibc has no wrapper)
_SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274, "arm64": 274}
#: the kernel clamps slices to [0.1 ms, 100 ms]
MIN_SLICE_US = 100
MAX_SLICE_US = 100_000


class _SchedAttr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32), ("sched_flags", ctypes.c_uint64),
                ("sched_nice", ctypes.c_int32), ("sched_priority", ctypes.c_uint32),
                ("sched_runtime", ctypes.c_uint64), ("sched_deadline", ctypes.c_uint64),
                ("sched_period", ctypes.c_uint64)]


def request_slice(slice_us: int, tid: int | None = None) -> str | None:
    """Ask for a ``slice_us`` microsecond slice for thread ``tid`` (default: the calling thread), keeping its
    policy (SCHED_OTHER) and nice value. Returns None on success, else why it was not applied."""
    if not MIN_SLICE_US <= slice_us <= MAX_SLICE_US:
        return f"slice {slice_us} us is outside [{MIN_SLICE_US}, {MAX_SLICE_US}] us"
    number = _SYS_SCHED_SETATTR.get(platform.machine())
    if platform.system() != "Linux" or number is None:
        return f"sched_setattr is not available on {platform.system()} {platform.machine()}"
    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        return "the thread does not run under SCHED_OTHER"
    libc = ctypes.CDLL(None, use_errno=True)
    attr = _SchedAttr(size=ctypes.sizeof(_SchedAttr), sched_policy=os.SCHED_OTHER,
                      sched_nice=os.getpriority(os.PRIO_PROCESS, 0), sched_runtime=slice_us * 1000)
    target = threading.get_native_id() if tid is None else tid
    if libc.syscall(number, target, ctypes.byref(attr), 0) != 0:
        return f"sched_setattr failed: {os.strerror(ctypes.get_errno())}"
    return None
