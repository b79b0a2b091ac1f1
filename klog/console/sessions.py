"""The console's logins (login mode, docs/console.md): server-side sessions, each holding the logged-in user's own
klog clients (a :class:`~klog.console.data.ClusterView` made with the user's SASL credentials).

The browser holds only the session id, in an HttpOnly, SameSite=Strict cookie: a random 256-bit value
(``secrets.token_urlsafe(32)``). A session ends on logout, after ``idle_timeout_s`` without a request, after
``max_age_s`` whatever its use, and when the console stops; its clients are closed then. At most ``max_sessions``
are open: a login beyond that is refused (it does not push another user out).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("klog.console")

#: the cookie that carries the session id
COOKIE_NAME = "klog_console_session"
#: defaults of --session-idle-timeout, --session-max-age (seconds) and --max-sessions
IDLE_TIMEOUT_S = 1800.0
MAX_AGE_S = 8 * 3600.0
MAX_SESSIONS = 32
#: the SASL mechanisms the login form offers (those klog's client logs in with a user name and password)
LOGIN_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class TooManySessions(RuntimeError):
    """The console has ``max_sessions`` open: a new login waits until one ends."""


@dataclasses.dataclass
class Session:
    id: str
    user: str
    mechanism: str
    #: the user's ClusterView (klog clients logged in as the user)
    view: Any
    #: every form of this session carries it, and every POST of the session must
    csrf_token: str
    created: float
    last_seen: float


class Sessions:
    """The open sessions, by id. Thread-safe; a session's clients are closed outside the lock."""

    def __init__(self, *, idle_timeout_s: float = IDLE_TIMEOUT_S, max_age_s: float = MAX_AGE_S,
                 max_sessions: int = MAX_SESSIONS, clock: Callable[[], float] = time.monotonic) -> None:
        if idle_timeout_s <= 0 or max_age_s <= 0:
            raise ValueError(f"session timeouts must be positive, got idle {idle_timeout_s} s, max age {max_age_s} s")
        if max_sessions < 1:
            raise ValueError(f"max sessions must be at least 1, got {max_sessions}")
        self.idle_timeout_s = idle_timeout_s
        self.max_age_s = max_age_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen >= self.idle_timeout_s or now - session.created >= self.max_age_s

    def has_room(self) -> bool:
        """Whether a login may open a session now (expired sessions are closed first)."""
        self.reap()
        return len(self) < self.max_sessions

    def open(self, user: str, mechanism: str, view: Any) -> Session:
        now = self._clock()
        session = Session(secrets.token_urlsafe(32), user, mechanism, view, secrets.token_urlsafe(32), now, now)
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise TooManySessions(f"the console has {self.max_sessions} sessions open (--max-sessions): "
                                      "log out elsewhere or wait for a session to end")
            self._sessions[session.id] = session
        log.info("console login: %s (%s), %d sessions open", user, mechanism, len(self))
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (its idle clock restarted), or None (unknown, ended or expired: an
        expired one is closed here)."""
        if not session_id:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if not self._expired(session, now):
                session.last_seen = now
                return session
            del self._sessions[session_id]
        self._end(session, "expired")
        return None

    def close(self, session_id: str, why: str = "logged out") -> bool:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._end(session, why)
        return True

    def reap(self) -> int:
        """Close the expired sessions; how many."""
        now = self._clock()
        with self._lock:
            done = [s for s in self._sessions.values() if self._expired(s, now)]
            for session in done:
                del self._sessions[session.id]
        for session in done:
            self._end(session, "expired")
        return len(done)

    def close_all(self) -> None:
        with self._lock:
            done = list(self._sessions.values())
            self._sessions.clear()
        for session in done:
            self._end(session, "console stopped")

    @staticmethod
    def _end(session: Session, why: str) -> None:
        log.info("console session of %s ended: %s", session.user, why)
        try:
            session.view.close()
        except Exception as exc:  # noqa: BLE001 - a client that fails to close must not keep others open
            log.warning("closing the clients of %s's session failed: %s", session.user, exc)
