"""``klog console`` as a process for the console's browser tests (tests/test_console.py,
tests/test_console_login_vs_kafka.py): started on a free port, its URL read from its log, stopped with SIGTERM."""

from __future__ import annotations

import re
import subprocess
import threading

from klog.testing.process import stop_process

#: the console's start-up line names its URL (http, or https with --https-cert)
_CONSOLE_URL_RE = re.compile(r"on (https?://[^\s]+) \(Ctrl-C")


class ConsoleProcess:
    """``command`` (a ``klog console`` command line with ``--port 0``) running until :meth:`stop`; ``url`` is where
    it serves, ``lines`` its log so far."""

    def __init__(self, command: list[str], start_timeout_s: float = 60) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self._found = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self._found.wait(start_timeout_s):
            self.stop()
            raise AssertionError("console did not start:\n" + "\n".join(self.lines))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())
            match = _CONSOLE_URL_RE.search(line)
            if match and not self._found.is_set():
                self.url = match.group(1)
                self._found.set()

    def stop(self) -> int:
        return stop_process(self.proc, 20)
