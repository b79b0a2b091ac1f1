"""The console's HTTP side: routes, Jinja2 pages, static files (all inside the package) and the sampler.

A stdlib ``ThreadingHTTPServer`` (one thread per request: the cluster calls block) renders the templates in
``klog/console/templates``; ``/static/`` serves ``klog/console/static``. No asset comes from the network at run
time. One JSON endpoint feeds the message browser's live tail. POSTs are the write actions (klog.console.actions):
a form posts to get a confirmation page, which posts again to do it; each must carry the console's CSRF token
and come from the console's own origin.
"""

from __future__ import annotations

import datetime
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
from klog.console.data import MAX_BROWSE_RECORDS, ClusterView
from klog.console.render import FORMATS, human_bytes, line_chart, record_view, sparkline

log = logging.getLogger("klog.console")

#: default seconds between samples of group lag and metrics (the charts' resolution)
SAMPLE_INTERVAL_S = 5.0
#: records shown per message-browser page by default
DEFAULT_LIMIT = 50
#: the largest form a POST may send (a produced message's value is in it)
MAX_FORM_BYTES = 1 << 20
#: notices of done actions kept for the page the browser is sent to
MAX_NOTICES = 100


class NotFound(LookupError):
    pass


def _templates() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("klog.console", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
    env.filters["bytes"] = human_bytes
    env.filters["ts"] = format_timestamp
    env.filters["sparkline"] = lambda values, label="": sparkline(values or [], label=label)
    env.filters["quote"] = lambda text: urllib.parse.quote(str(text), safe="")
    env.globals["formats"] = FORMATS
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
    """Routes a path and query to a page (HTML) or JSON; no sockets here."""

    def __init__(self, view: ClusterView, sample_interval_s: float) -> None:
        self.view = view
        self.sample_interval_s = sample_interval_s
        self.templates = _templates()
        #: every form carries it and every POST must: another site's page cannot post to the console
        self.csrf_token = secrets.token_urlsafe(32)
        #: id -> what a done action says on the page it leads to (the id is in that page's ``done`` parameter)
        self._notices: dict[str, str] = {}
        self._notices_lock = threading.Lock()
        #: the request being answered (one thread each): its notice
        self._request = threading.local()

    def page(self, name: str, **context: Any) -> str:
        return self.templates.get_template(name).render(
            bootstrap=self.view.bootstrap_servers, metrics=self.view.metrics is not None,
            refresh_s=self.sample_interval_s, csrf_token=self.csrf_token,
            notice=getattr(self._request, "notice", None), **context)

    def handle(self, path: str, query: dict[str, str]) -> tuple[int, str, bytes]:
        """(HTTP status, content type, body) for a GET."""
        from klog.client.errors import KafkaError

        parts = _path_parts(path)
        with self._notices_lock:
            self._request.notice = self._notices.get(query.get("done", ""))
        try:
            if parts and parts[0] == "static" and len(parts) == 2:
                return self._static(parts[1])
            if parts and parts[0] == "api":
                return self._api(parts[1:], query)
            return HTTPStatus.OK, "text/html; charset=utf-8", self._html(parts, query).encode()
        except BadRequest as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc), parts)
        except NotFound as exc:
            return self._error(HTTPStatus.NOT_FOUND, str(exc), parts)
        except KafkaError as exc:
            return self._error(HTTPStatus.BAD_GATEWAY, f"the cluster answered: {exc}", parts)

    def _error(self, status: int, message: str, parts: list[str], error_name: str = ""
               ) -> tuple[int, str, bytes]:
        if parts and parts[0] == "api":
            return status, "application/json", json.dumps({"error": message}).encode()
        return status, "text/html; charset=utf-8", self.page("error.html", status=status, message=message,
                                                              error_name=error_name, section="").encode()

    def post(self, path: str, form: dict[str, str], headers: dict[str, str]
             ) -> tuple[int, str, bytes, str | None]:
        """(HTTP status, content type, body, redirect location) for a POST: an action's confirmation page, or
        the action done (303 to the page it leads to), or why not."""
        from klog.client.errors import KafkaError

        parts = _path_parts(path)
        self._request.notice = None
        refused = self._refuse_cross_site(form, headers)
        if refused:
            return (*self._error(HTTPStatus.FORBIDDEN, refused, parts), None)
        try:
            plan = actions.plan(self.view, parts, form)
            if plan is None:
                raise NotFound(f"no action at /{'/'.join(parts)}")
        except BadRequest as exc:
            return (*self._error(HTTPStatus.BAD_REQUEST, str(exc), parts), None)
        except NotFound as exc:
            return (*self._error(HTTPStatus.NOT_FOUND, str(exc), parts), None)
        except KafkaError as exc:
            return (*self._error(HTTPStatus.CONFLICT, exc.message or str(exc), parts, exc.name), None)
        fields = {k: v for k, v in form.items() if k != "confirm"}
        if form.get("confirm") != "yes":
            body = self.page("action.html", section="", plan=plan, action=path, fields=fields, error=None)
            return HTTPStatus.OK, "text/html; charset=utf-8", body.encode(), None
        try:
            notice = plan.run()
        except KafkaError as exc:
            # the cluster refused: Kafka's error name and message, on the plan's page
            body = self.page("action.html", section="", plan=plan, action=path, fields=fields,
                             error={"name": exc.name, "message": exc.message or str(exc)})
            return HTTPStatus.CONFLICT, "text/html; charset=utf-8", body.encode(), None
        done = secrets.token_urlsafe(8)
        with self._notices_lock:
            self._notices[done] = notice
            while len(self._notices) > MAX_NOTICES:
                del self._notices[next(iter(self._notices))]
        return HTTPStatus.SEE_OTHER, "text/plain", b"", f"{plan.after or plan.back}?done={done}"

    def _refuse_cross_site(self, form: dict[str, str], headers: dict[str, str]) -> str | None:
        """Why a POST is not from the console's own pages, or None: the browser's Origin (and Sec-Fetch-Site
        when it sends one) must be this console's, and the form must carry the console's token."""
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{headers.get('host', '')}":
            return f"cross-origin request refused (Origin {origin})"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return "cross-site request refused"
        if not secrets.compare_digest(form.get("csrf", ""), self.csrf_token):
            return "the form's token is missing or stale: reload the page and try again"
        return None

    def _html(self, parts: list[str], query: dict[str, str]) -> str:
        if not parts:
            return self.page("overview.html", section="overview", cluster=self.view.overview())
        if parts[0] == "topics":
            if len(parts) == 1:
                internal = query.get("internal") == "1"
                return self.page("topics.html", section="topics", topics=self.view.topics(internal=internal),
                                 internal=internal)
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
        raise NotFound(f"no page at /{'/'.join(parts)}")

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


def _path_parts(path: str) -> list[str]:
    return [urllib.parse.unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        try:
            status, kind, body = self.server.app.handle(url.path, query)
        except Exception:
            log.exception("console page %s failed", self.path)
            status, kind, body = HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error (see the log)"
        self._answer(status, kind, body)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        """The actions' forms (application/x-www-form-urlencoded)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM_BYTES:
            self._answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "text/plain", b"form too large")
            self.close_connection = True
            return
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode("utf-8", errors="replace"),
                                           keep_blank_values=True))
        headers = {k.lower(): v for k, v in self.headers.items()}
        location = None
        try:
            status, kind, body, location = self.server.app.post(urllib.parse.urlsplit(self.path).path, form, headers)
        except Exception:
            log.exception("console action %s failed", self.path)
            status, kind, body = HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error (see the log)"
        self._answer(status, kind, body, location)

    def _answer(self, status: int, kind: str, body: bytes, location: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if location is not None:
            self.send_header("Location", location)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: ConsoleApp


class Console:
    """The web console: ``start()`` binds and serves on threads, ``stop()`` ends them; or ``serve_forever()``."""

    def __init__(self, bootstrap_servers: str, *, host: str = "127.0.0.1", port: int = 8080,
                 metrics_urls: list[str] | None = None, sample_interval_s: float = SAMPLE_INTERVAL_S,
                 client_config: dict[str, Any] | None = None) -> None:
        if sample_interval_s <= 0:
            raise ValueError(f"sample interval must be positive, got {sample_interval_s}")
        self.view = ClusterView(bootstrap_servers, metrics_urls=metrics_urls, client_config=client_config)
        try:
            self.httpd = _Server((host, port), _Handler)
        except OSError:
            self.view.close()
            raise
        self.httpd.app = ConsoleApp(self.view, sample_interval_s)
        self.sample_interval_s = sample_interval_s
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def _sample_forever(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.view.sample()
            except Exception as exc:  # the cluster may be down for a while: keep trying
                log.warning("sampling lag/metrics failed: %s", exc)
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
        self.view.close()

    def __enter__(self) -> Console:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
