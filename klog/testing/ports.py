"""TCP ports for the processes a test starts, that nothing else takes before those processes bind them.

A port the kernel picks with ``bind(0)`` is free only at that moment. It comes from the ephemeral range, which
every outgoing connection and every other ``bind(0)`` on the machine also draws from, so with tests running in
parallel a broker started seconds later (after ``format``, say) can find its port taken: CI saw exactly that,
"address already in use" on a controller listener. The ports handed out here come from just below the
ephemeral range, where the kernel never picks by itself; they are handed out in turn across every process on
the machine (a counter file under an exclusive lock), and each is checked to be bindable when handed out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from pathlib import Path

__all__ = ["TEST_PORTS_LOWEST", "free_port", "port_range"]

#: The lowest port handed out; the range runs from here to just below the kernel's ephemeral range.
TEST_PORTS_LOWEST = 20000
#: Below this many ports between TEST_PORTS_LOWEST and the ephemeral range, the kernel picks instead (bind(0)).
_MIN_RANGE = 2000
_COUNTER = Path(tempfile.gettempdir()) / "klog-test-ports.next"
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_range() -> range | None:
    """The ports :func:`free_port` hands out, or None when the ephemeral range leaves too few below it."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if ephemeral_low - TEST_PORTS_LOWEST < _MIN_RANGE:
        return None
    return range(TEST_PORTS_LOWEST, ephemeral_low)


def _bindable(port: int) -> bool:
    # No SO_REUSEADDR: a port with connections still in TIME_WAIT is passed over too.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and that no other caller of this function gets until every other
    port of the range has been handed out."""
    ports = port_range()
    if ports is None:
        return _kernel_port()
    try:
        fd = os.open(_COUNTER, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # another user's counter file, say: the kernel picks, as it did before this module
        return _kernel_port()
    try:
        with contextlib.suppress(OSError):  # the umask narrowed it: every user's test runs share the counter
            os.fchmod(fd, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        first = 0  # index in ports of the next port to try
        with contextlib.suppress(ValueError):
            first = ports.index(int(os.pread(fd, 16, 0).decode()))
        for i in range(first, first + len(ports)):
            port = ports[i % len(ports)]
            if _bindable(port):
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(ports[(i + 1) % len(ports)]).encode(), 0)
                return port
    finally:
        os.close(fd)  # closing releases the lock
    return _kernel_port()  # every port of the range is taken: let the kernel pick
