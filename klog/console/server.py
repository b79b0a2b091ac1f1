"""The console's HTTP side: routes, Jinja2 pages, static files (all inside the package) and the sampler.

A stdlib ``ThreadingHTTPServer`` (one thread per request: the cluster calls block) renders the templates in
``klog/console/templates``; ``/static/`` serves ``klog/console/static``. No asset comes from the network at run
time. One JSON endpoint feeds the message browser's live tail. POSTs are the write actions (klog.console.actions):
a form posts to get a confirmation page, which posts again to do it; each must carry the console's CSRF token
(the session's, in login mode) and come from the console's own origin.

Login mode (:class:`Login`, docs/console.md): every page but ``/login``, ``/static/`` and ``/api/health`` needs a
session (klog.console.sessions); a login is checked by logging in to the cluster with the user's SASL credentials,
and every page and action of the session runs with that user's own clients, so the cluster's ACLs decide.
"""

from __future__ import annotations

import dataclasses
import datetime
import http.cookies
import json
import logging
import mimetypes
import re
import secrets
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from klog.console import actions
from klog.console.actions import BadRequest, int_param
from klog.console.data import MAX_BROWSE_RECORDS, ClusterView, MetricsSource, refused_by_acls
from klog.console.history import History
from klog.console.render import FORMATS, human_bytes, line_chart, record_view, sparkline
from klog.console.sessions import COOKIE_NAME, LOGIN_MECHANISMS, Session, Sessions, TooManySessions

log = logging.getLogger("klog.console")

#: default seconds between samples of group lag and metrics (the charts' resolution)
SAMPLE_INTERVAL_S = 5.0
#: records shown per message-browser page by default
DEFAULT_LIMIT = 50
#: the largest form a POST may send (a produced message's value is in it)
MAX_FORM_BYTES = 1 << 20
#: notices of done actions kept for the page the browser is sent to
MAX_NOTICES = 100
#: the operation on the cluster each security page's request needs (DescribeAcls, DescribeUserScramCredentials,
#: DescribeClientQuotas)
SECURITY_PAGE_OPERATIONS = {"acls": "describe", "users": "describe", "quotas": "describe_configs"}


class NotFound(LookupError):
    pass


@dataclasses.dataclass
class Reply:
    """An HTTP answer: status, content type, body; a redirect's location and Set-Cookie values."""

    status: int
    kind: str
    body: bytes
    location: str | None = None
    cookies: list[str] = dataclasses.field(default_factory=list)


def _client_credentials(config: dict[str, Any]) -> bool:
    return bool(config.get("sasl.username") or config.get("sasl.jaas.config"))


def login_mode_wanted(config: dict[str, Any] | None, login: bool) -> bool:
    """Login mode: asked for (``--login``), or the client config names a SASL protocol without credentials. A
    ``--login`` without a SASL protocol is an error (the console would have nothing to check a password with)."""
    protocol = str((config or {}).get("security.protocol") or "PLAINTEXT").upper()
    sasl = protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    if login and not sasl:
        raise ValueError(f"--login needs security.protocol=SASL_PLAINTEXT or SASL_SSL in --command-config "
                         f"(it is {protocol}): the console checks a login by logging in to the cluster with it")
    return login or (sasl and not _client_credentials(config or {}))


@dataclasses.dataclass
class Login:
    """Login mode's settings: the client config every session starts from (without credentials), the mechanisms
    the form offers, and the sessions."""

    bootstrap_servers: str
    client_config: dict[str, Any]
    mechanisms: tuple[str, ...]
    sessions: Sessions
    history: History
    metrics: MetricsSource | None

    @classmethod
    def from_config(cls, bootstrap_servers: str, client_config: dict[str, Any], sessions: Sessions,
                    history: History, metrics: MetricsSource | None) -> Login:
        named = client_config.get("sasl.mechanism") or client_config.get("sasl.mechanisms")
        base = {k: v for k, v in client_config.items()
                if k not in ("sasl.username", "sasl.password", "sasl.jaas.config", "sasl.mechanism",
                             "sasl.mechanisms")}
        if named and not _client_credentials(client_config):
            mechanisms: tuple[str, ...] = (str(named).upper(),)
            if mechanisms[0] not in LOGIN_MECHANISMS:
                raise ValueError(f"sasl.mechanism {named!r}: the console's login takes "
                                 f"{', '.join(LOGIN_MECHANISMS)}")
        else:
            mechanisms = LOGIN_MECHANISMS
        return cls(bootstrap_servers, base, mechanisms, sessions, history, metrics)


def _templates() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("klog.console", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
    env.filters["bytes"] = human_bytes
    env.filters["ts"] = format_timestamp
    env.filters["sparkline"] = lambda values, label="": sparkline(values or [], label=label)
    env.filters["quote"] = lambda text: urllib.parse.quote(str(text), safe="")
    env.globals["formats"] = FORMATS
    env.globals["choices"] = actions.FORM_CHOICES
    return env


def format_timestamp(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO date/time (UTC unless it names a zone)."""
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))   # Python 3.10 has no "Z"
    except ValueError:
        raise BadRequest(f"timestamp {text!r} is neither milliseconds nor an ISO date/time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


class ConsoleApp:
    """Routes a path and query to a page (HTML) or JSON; no sockets here. Without ``login`` every request uses
    ``view``; in login mode each uses its session's view."""

    def __init__(self, view: ClusterView | None, sample_interval_s: float, *, login: Login | None = None,
                 https: bool = False) -> None:
        if view is None and login is None:
            raise ValueError("the console needs a cluster view or login mode")
        self._view = view
        self.login = login
        self.https = https
        self.sample_interval_s = sample_interval_s
        self.templates = _templates()
        #: every form carries it and every POST must: another site's page cannot post to the console (in login
        #: mode, the login form's; a session's forms carry the session's own)
        self.csrf_token = secrets.token_urlsafe(32)
        #: id -> what a done action says on the page it leads to (the id is in that page's ``done`` parameter)
        self._notices: dict[str, str] = {}
        #: (the session's CSRF token, a confirmation's id) -> the secret form fields (a password) its plan keeps
        #: off the confirmation page until confirmed
        self._pending: dict[tuple[str, str], dict[str, str]] = {}
        self._notices_lock = threading.Lock()
        #: the request being answered (one thread each): its notice and session
        self._request = threading.local()

    @property
    def view(self) -> ClusterView:
        """The cluster as the current request's principal sees it."""
        session: Session | None = getattr(self._request, "session", None)
        if session is not None:
            view: ClusterView = session.view
            return view
        assert self._view is not None, "a page of login mode answered without a session"
        return self._view

    def page(self, name: str, **context: Any) -> str:
        session: Session | None = getattr(self._request, "session", None)
        bootstrap = self.login.bootstrap_servers if self.login is not None else self.view.bootstrap_servers
        metrics = (self.login.metrics if self.login is not None else self.view.metrics) is not None
        return self.templates.get_template(name).render(
            bootstrap=bootstrap, metrics=metrics, refresh_s=self.sample_interval_s,
            csrf_token=session.csrf_token if session is not None else self.csrf_token,
            user=session.user if session is not None else None, login_mode=self.login is not None,
            notice=getattr(self._request, "notice", None), can=_can, **context)

    # ---- sessions -------------------------------------------------------------------------------------

    def _session_of(self, headers: dict[str, str]) -> tuple[Session | None, bool]:
        """The request's session, and whether it sent a session cookie at all."""
        cookie = http.cookies.SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except http.cookies.CookieError:
            return None, False
        morsel = cookie.get(COOKIE_NAME)
        if morsel is None or self.login is None:
            return None, morsel is not None
        return self.login.sessions.get(morsel.value), True

    def _cookie(self, value: str, *, clear: bool = False) -> str:
        parts = [f"{COOKIE_NAME}={value}", "Path=/", "HttpOnly", "SameSite=Strict"]
        if self.https:
            parts.append("Secure")
        if clear:
            parts.append("Max-Age=0")
        return "; ".join(parts)

    def _login_page(self, status: int, *, next_path: str = "/", error: dict[str, str] | None = None,
                    username: str = "", message: str | None = None, cookies: list[str] | None = None) -> Reply:
        assert self.login is not None
        body = self.page("login.html", section="login", mechanisms=self.login.mechanisms, next_path=next_path,
                         error=error, username=username, message=message)
        return Reply(status, "text/html; charset=utf-8", body.encode(), cookies=cookies or [])

    def _do_login(self, form: dict[str, str]) -> Reply:
        """Check the user's credentials by logging in to the cluster with them; a session on success."""
        from klog.client.errors import KafkaError

        assert self.login is not None
        next_path = _local_path(form.get("next", "/"))
        username = form.get("username", "").strip()
        password = form.get("password", "")
        mechanism = form.get("mechanism", "").strip().upper()
        if not username or not password:
            return self._login_page(HTTPStatus.BAD_REQUEST, next_path=next_path, username=username,
                                    error={"name": "", "message": "enter a user name and a password"})
        if mechanism not in self.login.mechanisms:
            return self._login_page(HTTPStatus.BAD_REQUEST, next_path=next_path, username=username, error={
                "name": "", "message": f"mechanism must be one of {', '.join(self.login.mechanisms)}"})
        if not self.login.sessions.has_room():
            return self._login_page(HTTPStatus.SERVICE_UNAVAILABLE, next_path=next_path, username=username, error={
                "name": "", "message": f"the console has {self.login.sessions.max_sessions} sessions open: "
                                       "log out elsewhere or wait for a session to end"})
        config = {**self.login.client_config, "sasl.mechanism": mechanism, "sasl.username": username,
                  "sasl.password": password}
        view: ClusterView | None = None
        try:
            view = ClusterView(self.login.bootstrap_servers, client_config=config, history=self.login.history,
                               metrics=self.login.metrics)   # logs in
            view.admin.describe_cluster()   # and the session answers
            session = self.login.sessions.open(username, mechanism, view)
        except (KafkaError, ValueError, TooManySessions) as exc:
            if view is not None:
                view.close()
            if isinstance(exc, KafkaError):
                # Kafka's own error: it does not say whether the user or the password was wrong, and neither do we
                log.warning("console login of %r with %s refused: %s %s", username, mechanism, exc.name,
                            exc.message or "")
                status, error = HTTPStatus.UNAUTHORIZED, {"name": exc.name, "message": exc.message or str(exc)}
            else:   # a setting the client refuses, or no room for another session
                status = HTTPStatus.BAD_REQUEST if isinstance(exc, ValueError) else HTTPStatus.SERVICE_UNAVAILABLE
                error = {"name": "", "message": str(exc)}
            return self._login_page(status, next_path=next_path, username=username, error=error)
        return Reply(HTTPStatus.SEE_OTHER, "text/plain", b"", next_path, [self._cookie(session.id)])

    # ---- GET ----------------------------------------------------------------------------------------------

    def handle(self, path: str, query: dict[str, str]) -> tuple[int, str, bytes]:
        """(HTTP status, content type, body) for a GET without cookies (no login mode)."""
        reply = self.get(path, query, {})
        return reply.status, reply.kind, reply.body

    def get(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Reply:
        """The answer to a GET."""
        from klog.client.errors import KafkaError

        parts = _path_parts(path)
        with self._notices_lock:
            self._request.notice = self._notices.get(query.get("done", ""))
        self._request.session = None
        try:
            if parts and parts[0] == "static" and len(parts) == 2:
                return Reply(*self._static(parts[1]))
            if parts == ["api", "health"]:
                return Reply(*self._api(parts[1:], query))
            if self.login is not None:
                session, had_cookie = self._session_of(headers)
                if parts == ["login"]:
                    if session is not None:
                        return Reply(HTTPStatus.SEE_OTHER, "text/plain", b"", "/")
                    return self._login_page(HTTPStatus.OK, next_path=_local_path(query.get("next", "/")))
                if session is None:
                    gone = [self._cookie("", clear=True)] if had_cookie else []
                    if parts and parts[0] == "api":
                        return Reply(HTTPStatus.UNAUTHORIZED, "application/json",
                                     json.dumps({"error": "log in first"}).encode(), cookies=gone)
                    target = path + ("?" + urllib.parse.urlencode(query) if query else "")
                    where = "/login?" + urllib.parse.urlencode({"next": target}) if target != "/" else "/login"
                    if had_cookie:
                        where += ("&" if "?" in where else "?") + "ended=1"
                    return Reply(HTTPStatus.SEE_OTHER, "text/plain", b"", where, gone)
                self._request.session = session
            if parts and parts[0] == "api":
                return Reply(*self._api(parts[1:], query))
            return Reply(HTTPStatus.OK, "text/html; charset=utf-8", self._html(parts, query).encode())
        except BadRequest as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc), parts)
        except NotFound as exc:
            return self._error(HTTPStatus.NOT_FOUND, str(exc), parts)
        except KafkaError as exc:
            if refused_by_acls(exc):
                return self._error(HTTPStatus.FORBIDDEN, f"the cluster refused: {exc.message or exc}", parts,
                                   exc.name)
            return self._error(HTTPStatus.BAD_GATEWAY, f"the cluster answered: {exc}", parts)
        finally:
            self._request.session = None

    def _error(self, status: int, message: str, parts: list[str], error_name: str = "") -> Reply:
        if parts and parts[0] == "api":
            return Reply(status, "application/json", json.dumps({"error": message}).encode())
        return Reply(status, "text/html; charset=utf-8", self.page("error.html", status=status, message=message,
                                                                    error_name=error_name, section="").encode())

    # ---- POST ---------------------------------------------------------------------------------------------

    def post(self, path: str, form: dict[str, str], headers: dict[str, str]) -> Reply:
        """The answer to a POST: an action's confirmation page, or the action done (303 to the page it leads
        to), or why not; in login mode also the login and the logout."""
        parts = _path_parts(path)
        self._request.notice = None
        self._request.session = None
        try:
            if self.login is None:
                return self._post_action(path, parts, form, headers, self.csrf_token)
            session, had_cookie = self._session_of(headers)
            if parts == ["login"]:
                refused = self._refuse_cross_site(form, headers, self.csrf_token)
                if refused:
                    return self._error(HTTPStatus.FORBIDDEN, refused, parts)
                return self._do_login(form)
            if session is None:
                gone = [self._cookie("", clear=True)] if had_cookie else []
                return self._login_page(HTTPStatus.UNAUTHORIZED, message="Log in first: your session has ended."
                                        if had_cookie else "Log in first.", cookies=gone)
            self._request.session = session
            if parts == ["logout"]:
                refused = self._refuse_cross_site(form, headers, session.csrf_token)
                if refused:
                    return self._error(HTTPStatus.FORBIDDEN, refused, parts)
                self.login.sessions.close(session.id)
                return Reply(HTTPStatus.SEE_OTHER, "text/plain", b"", "/login?out=1",
                             [self._cookie("", clear=True)])
            return self._post_action(path, parts, form, headers, session.csrf_token)
        finally:
            self._request.session = None

    def _post_action(self, path: str, parts: list[str], form: dict[str, str], headers: dict[str, str],
                     csrf_token: str) -> Reply:
        from klog.client.errors import KafkaError

        refused = self._refuse_cross_site(form, headers, csrf_token)
        if refused:
            return self._error(HTTPStatus.FORBIDDEN, refused, parts)
        if form.get("pending"):
            # a confirmation of a plan with secret fields: they were kept here, not on the page
            with self._notices_lock:
                kept = self._pending.pop((csrf_token, form["pending"]), None)
            if kept is None:
                return self._error(HTTPStatus.BAD_REQUEST, "this confirmation has expired: fill the form again",
                                   parts)
            form = {**form, **kept}
        try:
            plan = actions.plan(self.view, parts, form)
            if plan is None:
                raise NotFound(f"no action at /{'/'.join(parts)}")
        except BadRequest as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc), parts)
        except NotFound as exc:
            return self._error(HTTPStatus.NOT_FOUND, str(exc), parts)
        except KafkaError as exc:
            return self._error(_refusal_status(exc), exc.message or str(exc), parts, exc.name)
        fields = {k: v for k, v in form.items() if k not in ("confirm", "pending", *plan.secret_fields)}
        if form.get("confirm") != "yes":
            if plan.secret_fields:
                pending = secrets.token_urlsafe(16)
                with self._notices_lock:
                    self._pending[(csrf_token, pending)] = {k: form.get(k, "") for k in plan.secret_fields}
                    while len(self._pending) > MAX_NOTICES:
                        del self._pending[next(iter(self._pending))]
                fields["pending"] = pending
            body = self.page("action.html", section="", plan=plan, action=path, fields=fields, error=None)
            return Reply(HTTPStatus.OK, "text/html; charset=utf-8", body.encode())
        try:
            notice = plan.run()
        except KafkaError as exc:
            # the cluster refused: Kafka's error name and message, on the plan's page
            body = self.page("action.html", section="", plan=plan, action=path, fields=fields,
                             error={"name": exc.name, "message": exc.message or str(exc)})
            return Reply(_refusal_status(exc), "text/html; charset=utf-8", body.encode())
        done = secrets.token_urlsafe(8)
        with self._notices_lock:
            self._notices[done] = notice
            while len(self._notices) > MAX_NOTICES:
                del self._notices[next(iter(self._notices))]
        return Reply(HTTPStatus.SEE_OTHER, "text/plain", b"", f"{plan.after or plan.back}?done={done}")

    def _refuse_cross_site(self, form: dict[str, str], headers: dict[str, str], csrf_token: str) -> str | None:
        """Why a POST is not from the console's own pages, or None: the browser's Origin (and Sec-Fetch-Site
        when it sends one) must be this console's, and the form must carry the token (the session's, in login
        mode)."""
        origin = headers.get("origin")
        scheme = "https" if self.https else "http"
        if origin is not None and origin != f"{scheme}://{headers.get('host', '')}":
            return f"cross-origin request refused (Origin {origin})"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return "cross-site request refused"
        if not secrets.compare_digest(form.get("csrf", ""), csrf_token):
            return "the form's token is missing or stale: reload the page and try again"
        return None

    def _html(self, parts: list[str], query: dict[str, str]) -> str:
        if not parts:
            return self.page("overview.html", section="overview", cluster=self.view.overview())
        if parts[0] == "topics":
            if len(parts) == 1:
                internal = query.get("internal") == "1"
                return self.page("topics.html", section="topics", topics=self.view.topics(internal=internal),
                                 internal=internal, cluster_ops=self.view.cluster_operations())
            if len(parts) == 2:
                return self.page("topic.html", section="topics", topic=self._topic(parts[1]))
            if len(parts) == 3 and parts[2] == "messages":
                browse, fmt = self._browse(parts[1], query)
                topic = self._topic(parts[1])
                return self.page("messages.html", section="topics", topic=topic, browse=browse, fmt=fmt,
                                 records=[record_view(r, fmt) for r in browse["records"]],
                                 query=query, max_limit=MAX_BROWSE_RECORDS)
        if parts[0] == "groups":
            if len(parts) == 1:
                return self.page("groups.html", section="groups", groups=self.view.groups())
            if len(parts) == 2:
                group = self.view.group(parts[1])
                if group["state"] in ("Dead", "Unknown") and not group["lag"]:
                    raise NotFound(f"consumer group {parts[1]!r} does not exist")
                chart = line_chart(group.pop("lag_series"), y_label=f"lag of {parts[1]}")
                return self.page("group.html", section="groups", group=group, chart=chart)
        if parts in (["acls"], ["users"], ["quotas"]):
            return self._security_page(parts[0])
        raise NotFound(f"no page at /{'/'.join(parts)}")

    def _security_page(self, name: str) -> str:
        """ACLs, SCRAM users or client quotas; the cluster's refusal (e.g. CLUSTER_AUTHORIZATION_FAILED) said on
        the page."""
        from klog.client.errors import KafkaError

        read = {"acls": self.view.acls, "users": self.view.users, "quotas": self.view.quotas}[name]
        needed = SECURITY_PAGE_OPERATIONS[name]
        cluster_ops = self.view.cluster_operations()
        if not _can(cluster_ops, needed):
            # not asked: the principal may not, by DescribeCluster's authorized operations (and Apache Kafka 4.3
            # never answers an unauthorized DescribeUserScramCredentials of all users: it fails building the error)
            return self.page(f"{name}.html", section=name, rows=[], cluster_ops=cluster_ops, refused={
                "name": "CLUSTER_AUTHORIZATION_FAILED",
                "message": f"you may not {needed.replace('_', ' ')} the cluster (its ACLs)"})
        try:
            rows, refused = read(), None
        except KafkaError as exc:
            rows, refused = [], {"name": exc.name, "message": exc.message or str(exc)}
        return self.page(f"{name}.html", section=name, rows=rows, refused=refused, cluster_ops=cluster_ops)

    def _topic(self, name: str, *, partitions_only: bool = False) -> Any:
        """The topic's page data (or just its partition count): NotFound when the cluster does not know it."""
        from klog.client.errors import ErrorCode, KafkaError

        try:
            return self.view.partition_count(name) if partitions_only else self.view.topic(name)
        except KafkaError as exc:
            if getattr(exc, "code", None) in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
                raise NotFound(f"topic {name!r} does not exist") from None
            raise

    def _browse(self, topic: str, query: dict[str, str]) -> tuple[dict[str, Any], str]:
        fmt = query.get("format", "text")
        if fmt not in FORMATS:
            raise BadRequest(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        partition = int_param(query, "partition", 0)
        limit = int_param(query, "limit", DEFAULT_LIMIT, lo=1)
        offset = int_param(query, "offset", None)
        raw_ts = query.get("timestamp", "").strip()
        timestamp = parse_timestamp(raw_ts) if raw_ts else None
        wait_s = min(float(int_param(query, "wait_ms", 1500) or 0) / 1000, 5.0)
        assert partition is not None and limit is not None
        if partition >= self._topic(topic, partitions_only=True):
            raise NotFound(f"topic {topic!r} has no partition {partition}")
        return self.view.messages(topic, partition, offset=offset, timestamp_ms=timestamp, limit=limit,
                                  wait_s=wait_s), fmt

    def _api(self, parts: list[str], query: dict[str, str]) -> tuple[int, str, bytes]:
        if len(parts) == 3 and parts[0] == "topics" and parts[2] == "messages":
            browse, fmt = self._browse(parts[1], query)
            body = {k: v for k, v in browse.items() if k != "records"}
            body["records"] = [{**record_view(r, fmt), "time": format_timestamp(r.timestamp)}
                               for r in browse["records"]]
            return HTTPStatus.OK, "application/json", json.dumps(body).encode()
        if parts == ["health"]:
            return HTTPStatus.OK, "application/json", b'{"status": "ok"}'
        raise NotFound(f"no API at /api/{'/'.join(parts)}")

    @staticmethod
    def _static(name: str) -> tuple[int, str, bytes]:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
            raise NotFound(name)
        item = resources.files("klog.console").joinpath("static").joinpath(name)
        if not item.is_file():
            raise NotFound(f"no static file {name}")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return HTTPStatus.OK, kind, item.read_bytes()


def _can(operations: frozenset[str] | None, operation: str) -> bool:
    """May the principal do ``operation`` (a lower-case AclOperation name), by the authorized operations the
    cluster gave (None: it did not say, so the action is offered and the cluster decides when it is used)."""
    return operations is None or operation in operations or "all" in operations


def _refusal_status(exc: Any) -> int:
    return HTTPStatus.FORBIDDEN if refused_by_acls(exc) else HTTPStatus.CONFLICT


def _local_path(target: str) -> str:
    """Where to go after the login: a path of this console only (never another site: no scheme, no ``//``)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _path_parts(path: str) -> list[str]:
    return [urllib.parse.unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            reply = self.server.app.get(url.path, query, headers)
        except Exception:
            log.exception("console page %s failed", url.path)
            reply = Reply(HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error (see the log)")
        self._answer(reply)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        """The actions' forms (application/x-www-form-urlencoded)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM_BYTES:
            self._answer(Reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "text/plain", b"form too large"))
            self.close_connection = True
            return
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode("utf-8", errors="replace"),
                                           keep_blank_values=True))
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = urllib.parse.urlsplit(self.path).path
        try:
            reply = self.server.app.post(path, form, headers)
        except Exception:
            log.exception("console action %s failed", path)
            reply = Reply(HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error (see the log)")
        self._answer(reply)

    def _answer(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.kind)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("Cache-Control", "no-store")
        if reply.location is not None:
            self.send_header("Location", reply.location)
        for cookie in reply.cookies:
            self.send_header("Set-Cookie", cookie)
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: ConsoleApp


class Console:
    """The web console: ``start()`` binds and serves on threads, ``stop()`` ends them; or ``serve_forever()``.

    ``login``: login mode (see :func:`login_mode_wanted`); its sessions' limits are ``sessions``. In login mode the
    sampler reads group lag only with the credentials ``client_config`` gives (a service account), never with a
    logged-in user's; without them it only scrapes ``metrics_urls``. ``https_cert``/``https_key``: serve over TLS
    (PEM files), which makes the session cookie ``Secure``."""

    def __init__(self, bootstrap_servers: str, *, host: str = "127.0.0.1", port: int = 8080,
                 metrics_urls: list[str] | None = None, sample_interval_s: float = SAMPLE_INTERVAL_S,
                 client_config: dict[str, Any] | None = None, login: bool = False,
                 sessions: Sessions | None = None, https_cert: str | None = None,
                 https_key: str | None = None) -> None:
        if sample_interval_s <= 0:
            raise ValueError(f"sample interval must be positive, got {sample_interval_s}")
        if (https_cert is None) != (https_key is None):
            raise ValueError("--https-cert and --https-key go together")
        config = dict(client_config or {})
        self.login: Login | None = None
        #: the console's own view: every page's without login mode; the sampler's (or None) in login mode
        self.view: ClusterView | None = None
        if login_mode_wanted(config, login):
            history = History()
            metrics = MetricsSource(metrics_urls, history) if metrics_urls else None
            # not ``sessions or ...``: an empty Sessions is falsy (it has a length)
            self.login = Login.from_config(bootstrap_servers, config,
                                           sessions if sessions is not None else Sessions(), history, metrics)
            if _client_credentials(config):
                self.view = ClusterView(bootstrap_servers, client_config=config, history=history, metrics=metrics)
        else:
            self.view = ClusterView(bootstrap_servers, metrics_urls=metrics_urls, client_config=config)
        try:
            self.httpd = _Server((host, port), _Handler)
            if https_cert is not None:
                import ssl

                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.minimum_version = ssl.TLSVersion.TLSv1_2
                context.load_cert_chain(https_cert, https_key)
                self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        except (OSError, ValueError):
            self.httpd_close_quietly()
            if self.view is not None:
                self.view.close()
            raise
        self.https = https_cert is not None
        self.httpd.app = ConsoleApp(self.view if self.login is None else None, sample_interval_s,
                                    login=self.login, https=self.https)
        self.sample_interval_s = sample_interval_s
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def httpd_close_quietly(self) -> None:
        httpd = getattr(self, "httpd", None)
        if httpd is not None:
            httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{'https' if self.https else 'http'}://{host!s}:{port}"

    def _sample_once(self, now: float) -> None:
        if self.view is not None:
            self.view.sample(now)
        elif self.login is not None and self.login.metrics is not None:
            self.login.metrics.scrape(now)   # the metrics endpoint needs no cluster credentials

    def _sample_forever(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._sample_once(time.time())
            except Exception as exc:  # the cluster may be down for a while: keep trying
                log.warning("sampling lag/metrics failed: %s", exc)
            if self.login is not None:
                self.login.sessions.reap()
            self._stop.wait(max(0.0, self.sample_interval_s - (time.monotonic() - started)))

    def start(self) -> Console:
        for target, name in ((self.httpd.serve_forever, "klog-console-http"),
                             (self._sample_forever, "klog-console-sampler")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for thread in self._threads:
            thread.join(10)
        if self.login is not None:
            self.login.sessions.close_all()
        if self.view is not None:
            self.view.close()

    def __enter__(self) -> Console:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
