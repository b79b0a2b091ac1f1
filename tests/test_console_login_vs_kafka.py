"""The web console's login mode (issue 33 item 6), on klog and on Apache Kafka 4.x from the same properties: a
SASL_PLAINTEXT listener with SCRAM, Kafka's StandardAuthorizer and a super user. ``klog console`` runs as a process
with a ``--command-config`` naming SASL_PLAINTEXT and no user (login mode), driven by Playwright in Debian's
headless Chromium:

- the super user logs in (a real SaslAuthenticate of the console with the typed credentials), sees both topics,
  the create-topic form and the ACLs, SCRAM users and client quotas the test made; the cookie is HttpOnly and
  SameSite=Strict, the browser's localStorage and sessionStorage stay empty and no response carries the password;
- a user with Describe on one topic only sees just that topic, no write action, the cluster's authorization
  errors on the security pages, and a crafted POST (with the session's own CSRF token) is refused with the
  cluster's authorization error;
- a wrong password is refused with Kafka's error, no cookie, one log line without the password;
- the super user creates and deletes an ACL, sets a SCRAM password (which then logs in to the console; it is on no
  page, the confirmation page included) and deletes it, sets and removes a quota, each through its confirmation
  page, checked with klog's admin client;
- logging out ends the session (the old cookie no longer works); an idle session expires to the login page;
- over the broker's SASL_SSL listener, with the console itself served over HTTPS, the login works and the cookie is
  also Secure.

One broker (SASL_PLAINTEXT and SASL_SSL listeners) and one console of each kind for the module.
"""

from __future__ import annotations

import http.client
import re
import ssl
import sys
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pytest

from browser_support import save_screenshot
from console_support import ConsoleProcess

from klog.client.admin import AclBinding, AdminClient, UserScramCredentialUpsertion
from klog.client.errors import KafkaError
from klog.console.server import login_mode_wanted
from klog.console.sessions import Sessions, TooManySessions
from klog.testing.certs import CertificateAuthority
from klog.testing.kafka import free_port, one_broker

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw";')
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                      "SASL_SSL:SASL_SSL",
    "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # the broker's own PLAINTEXT listener (the test's setup, inter-broker) is ANONYMOUS
    "super.users": "User:admin;User:ANONYMOUS",
    "connection.failed.authentication.delay.ms": 100,
}
PASSWORDS = {"admin": "admin-Secret-42", "alice": "alice-Secret-42"}
MECHANISM = "SCRAM-SHA-256"
PUBLIC, SECRET = "public-orders", "secret-payroll"


# ---- pure parts --------------------------------------------------------------------------------------------

def test_login_mode_is_a_sasl_config_without_credentials_or_asked_for() -> None:
    assert not login_mode_wanted(None, False)
    assert not login_mode_wanted({"client.id": "ops"}, False)
    assert login_mode_wanted({"security.protocol": "SASL_SSL"}, False)
    assert not login_mode_wanted({"security.protocol": "sasl_plaintext", "sasl.username": "svc",
                                  "sasl.password": "pw"}, False)
    assert login_mode_wanted({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "svc",
                              "sasl.password": "pw"}, True)
    with pytest.raises(ValueError, match="--login needs security.protocol=SASL_PLAINTEXT or SASL_SSL"):
        login_mode_wanted({"security.protocol": "SSL"}, True)


class _Clients:
    """What a session holds, reduced to what Sessions does with it: close it once."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_sessions_expire_when_idle_or_old_are_bounded_and_close_their_clients() -> None:
    now = [0.0]
    sessions = Sessions(idle_timeout_s=10, max_age_s=25, max_sessions=2, clock=lambda: now[0])
    a, b = _Clients(), _Clients()
    first = sessions.open("alice", MECHANISM, a)
    second = sessions.open("bob", MECHANISM, b)
    assert len(first.id) >= 43 and first.id != second.id and first.csrf_token != second.csrf_token
    with pytest.raises(TooManySessions, match="2 sessions open"):
        sessions.open("carol", MECHANISM, _Clients())
    for t in (8.0, 16.0, 24.0):        # used every 8 s: never idle for 10 s ...
        now[0] = t
        assert sessions.get(first.id) is first
    assert sessions.get(second.id) is None and b.closed == 1     # ... bob was idle
    now[0] = 25.0                      # ... but 25 s after the login it ends anyway
    assert sessions.get(first.id) is None and a.closed == 1
    c = _Clients()
    third = sessions.open("carol", MECHANISM, c)
    assert sessions.close(third.id) and c.closed == 1 and not sessions.close(third.id)
    d = _Clients()
    sessions.open("dave", MECHANISM, d)
    sessions.close_all()
    assert d.closed == 1 and len(sessions) == 0
    with pytest.raises(ValueError):
        Sessions(max_sessions=0)


# ---- the console against a secured broker --------------------------------------------------------------------

def console_process(bootstrap: str, config: Path, *extra: str) -> ConsoleProcess:
    """``klog console`` on a free port with the client ``config`` and extra options; stopped with SIGTERM."""
    return ConsoleProcess([sys.executable, "-m", "klog.console", "--bootstrap-server", bootstrap, "--port", "0",
                           "--sample-interval", "1", "--command-config", str(config), *extra])


def _scram_admin(sasl: str, user: str) -> AdminClient:
    return AdminClient(sasl, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM,
                                "sasl.username": user, "sasl.password": PASSWORDS[user],
                                "default.api.timeout.ms": 10000})


def _wait_logs_in(sasl: str, user: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with _scram_admin(sasl, user) as admin:
                admin.describe_cluster()
            return
        except KafkaError as exc:
            assert time.monotonic() < deadline, f"{user} cannot log in: {exc}"
            time.sleep(0.5)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return {"ca": ca, "broker": ca.issue("broker"), "console": ca.issue("console")}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pki: Any) -> Any:
    """(SASL bootstrap, login-mode console, its client properties, SASL_SSL bootstrap) on a klog or an Apache
    Kafka broker, with the users, topics, ACL and quota the tests look for."""
    root = tmp_path_factory.mktemp(request.param)
    sasl_port, ssl_port = free_port(), free_port()
    properties = {**PROPERTIES, "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"].keystore_file}
    with one_broker(request.param, root, properties,
                    extra_listeners=[f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                                     f"SASL_SSL://127.0.0.1:{ssl_port}"]) as plaintext:
        sasl = f"127.0.0.1:{sasl_port}"
        from klog.client.admin import NewTopic

        with AdminClient(plaintext) as admin:   # ANONYMOUS, a super user, on the PLAINTEXT listener
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(u, MECHANISM, p, 8192)
                                                for u, p in PASSWORDS.items()])
            admin.create_topics([NewTopic(PUBLIC, 2, 1), NewTopic(SECRET, 1, 1)])
            admin.create_acls([AclBinding("topic", PUBLIC, "User:alice", "describe")])
            admin.alter_client_quotas([({"user": "alice"}, {"producer_byte_rate": 1048576.0})])
        for user in PASSWORDS:
            _wait_logs_in(sasl, user)
        config = root / "console.properties"
        config.write_text("security.protocol=SASL_PLAINTEXT\ndefault.api.timeout.ms=15000\n")
        console = console_process(sasl, config)
        try:
            yield sasl, console, config, f"127.0.0.1:{ssl_port}"
        finally:
            console.stop()


def _log_in(page: Any, url: str, user: str, password: str) -> None:
    page.goto(url + "/topics")
    page.wait_for_selector("#login-form")
    assert urllib.parse.urlsplit(page.url).path == "/login"
    page.fill("#login-form [name=username]", user)
    page.fill("#login-form [name=password]", password)
    page.select_option("#login-form [name=mechanism]", MECHANISM)
    page.click("#login-button")
    page.wait_for_load_state()


def _shown_topics(page: Any) -> list[str]:
    return sorted(page.locator("#topics tbody tr[data-topic]").evaluate_all(
        "rows => rows.map(r => r.dataset.topic)"))


def test_the_super_user_logs_in_and_sees_topics_acls_users_and_quotas(secured: Any, headless_chromium: Any,
                                                                      tmp_path: Path) -> None:
    """Screenshots of the login form and the three pages go to $KLOG_CONSOLE_SCREENSHOTS when set."""
    _, console, _, _ = secured
    context = headless_chromium.new_context()
    bodies: list[tuple[str, bytes]] = []
    page = context.new_page()
    page.on("response", lambda r: bodies.append((r.url, r.body())) if r.status < 300 else None)
    try:
        page.set_viewport_size({"width": 1280, "height": 640})
        page.goto(console.url + "/login")
        save_screenshot(page, "KLOG_CONSOLE_SCREENSHOTS", "console-login", tmp_path)
        _log_in(page, console.url, "admin", PASSWORDS["admin"])
        assert urllib.parse.urlsplit(page.url).path == "/topics"      # back where the login was asked for
        assert page.inner_text("#user") == "admin"
        assert _shown_topics(page) == [PUBLIC, SECRET]
        assert page.locator("#create-topic").count() == 1
        page.goto(console.url + f"/topics/{PUBLIC}")
        for form in ("#produce-form", "#config-form", "#partitions-form", "#delete-records-form",
                     "#delete-topic-form"):
            assert page.locator(form).count() == 1, form

        page.click("#nav-acls")
        page.wait_for_url("**/acls")
        row = page.locator(f'#acls tr[data-principal="User:alice"][data-resource="{PUBLIC}"]')
        assert row.locator("td").all_inner_texts() == ["topic", PUBLIC, "literal", "User:alice", "*", "describe",
                                                       "allow", "Delete…"]
        save_screenshot(page, "KLOG_CONSOLE_SCREENSHOTS", "console-acls", tmp_path)
        page.click("#nav-users")
        page.wait_for_url("**/users")
        for user in PASSWORDS:
            assert page.locator(f'#users tr[data-user="{user}"] td').all_inner_texts() == [user, MECHANISM, "8192",
                                                                                        "Delete…"]
        page.click("#nav-quotas")
        page.wait_for_url("**/quotas")
        assert page.locator('#quotas tr[data-entity="user=alice"] td').all_inner_texts() == [
            "user=alice", "producer_byte_rate", "1048576", "Remove…"]

        [cookie] = context.cookies()
        assert cookie["name"] == "klog_console_session" and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert len(cookie["value"]) >= 43                                   # 256 random bits
        assert page.evaluate("() => [localStorage.length, sessionStorage.length]") == [0, 0]
        assert page.evaluate("() => document.cookie") == ""                 # HttpOnly: no script sees it
        page.check("#auto-refresh")                                         # remembered in the URL, not storage
        assert page.evaluate("() => [localStorage.length, sessionStorage.length]") == [0, 0]
        assert len(bodies) >= 6
        for url, body in bodies:
            assert PASSWORDS["admin"].encode() not in body, url
            assert PASSWORDS["admin"] not in url
    finally:
        context.close()


def test_a_user_with_describe_on_one_topic_sees_only_it_and_is_refused_by_the_cluster(
        secured: Any, headless_chromium: Any) -> None:
    _, console, _, _ = secured
    context = headless_chromium.new_context()
    page = context.new_page()
    try:
        _log_in(page, console.url, "alice", PASSWORDS["alice"])
        assert page.inner_text("#user") == "alice"
        assert _shown_topics(page) == [PUBLIC]
        assert page.locator("#create-topic").count() == 0                  # no Create on the cluster
        page.goto(console.url + f"/topics/{PUBLIC}")
        assert page.inner_text("#topic-name") == PUBLIC
        assert page.locator("form.action").count() == 0                   # no write action offered
        assert "describe" in page.inner_text("#no-actions")
        assert page.locator("#configs-refused b").inner_text() == "TOPIC_AUTHORIZATION_FAILED"

        # the secret topic: the cluster's error, not its data
        response = page.goto(console.url + f"/topics/{SECRET}")
        assert response is not None and response.status == 403
        assert page.inner_text("#error-name") == "TOPIC_AUTHORIZATION_FAILED"
        for name in ("acls", "users", "quotas"):
            page.goto(f"{console.url}/{name}")
            assert page.inner_text("#refused #error-name") == "CLUSTER_AUTHORIZATION_FAILED", name
            assert page.locator("form.action, form.row-action").count() == 0, name

        # a crafted POST with the session's own token: the cluster refuses it
        token = page.locator("#logout-form [name=csrf]").get_attribute("value")
        refused = page.request.post(f"{console.url}/topics/{PUBLIC}/delete",
                                    form={"csrf": token, "confirm": "yes"}, max_redirects=0)
        assert refused.status == 403
        assert "TOPIC_AUTHORIZATION_FAILED" in refused.text()
        created = page.request.post(f"{console.url}/topics", form={"csrf": token, "name": "alice-topic",
                                                                   "confirm": "yes"}, max_redirects=0)
        assert created.status == 403 and "AUTHORIZATION_FAILED" in created.text()
        # and the admin's session token does not work in alice's session
        stale = page.request.post(f"{console.url}/topics/{PUBLIC}/delete", form={"csrf": "x" * 43, "confirm": "yes"},
                                  max_redirects=0)
        assert stale.status == 403 and "token is missing or stale" in stale.text()
    finally:
        context.close()
    with _scram_admin(secured[0], "admin") as admin:
        assert {PUBLIC, SECRET} <= set(admin.list_topics()) and "alice-topic" not in admin.list_topics()


def test_a_wrong_password_is_refused_with_kafkas_error_and_no_session(secured: Any, headless_chromium: Any) -> None:
    _, console, _, _ = secured
    wrong = f"wrong-{uuid.uuid4().hex[:8]}"
    before = len(console.lines)
    context = headless_chromium.new_context()
    page = context.new_page()
    try:
        _log_in(page, console.url, "alice", wrong)
        assert urllib.parse.urlsplit(page.url).path == "/login"
        assert page.inner_text("#error-name") == "SASL_AUTHENTICATION_FAILED"
        text = page.inner_text("#login-error")
        assert "alice" not in text and "user" not in text.lower().replace("username", "")   # no hint which part
        assert context.cookies() == []
        assert page.locator("#login-form [name=password]").input_value() == ""
        assert wrong not in page.content()
    finally:
        context.close()
    time.sleep(0.5)
    logged = [line for line in console.lines[before:] if "login of 'alice'" in line]
    assert len(logged) == 1 and "refused" in logged[0] and "SASL_AUTHENTICATION_FAILED" in logged[0], logged
    assert not any(wrong in line for line in console.lines)


def _act(page: Any, form: str, fields: dict[str, str], title: str, notice: str) -> None:
    """Fill and submit an action's form, check its confirmation page, confirm, and check the notice."""
    for name, value in fields.items():
        field = page.locator(f"{form} [name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("#action-title")
    assert page.inner_text("#action-title") == title
    page.click("#confirm-button")
    page.wait_for_selector("#notice")
    assert page.inner_text("#notice") == notice


def _row_action(page: Any, row: str, notice: str) -> None:
    page.click(f"{row} form.row-action button")
    page.wait_for_selector("#confirm-button")
    page.click("#confirm-button")
    page.wait_for_selector("#notice")
    assert page.inner_text("#notice") == notice


def test_the_super_user_manages_acls_users_and_quotas_through_confirmation_pages(
        secured: Any, headless_chromium: Any) -> None:
    sasl, console, _, _ = secured
    bob, bob_password = f"bob-{uuid.uuid4().hex[:6]}", f"Bob-Pw-{uuid.uuid4().hex[:8]}"
    context = headless_chromium.new_context()
    bodies: list[tuple[str, bytes]] = []
    page = context.new_page()
    page.on("response", lambda r: bodies.append((r.url, r.body())) if r.status < 300 or r.status >= 400 else None)
    try:
        _log_in(page, console.url, "admin", PASSWORDS["admin"])
        # an ACL
        page.goto(console.url + "/acls")
        page.click("#create-acl")
        _act(page, "#create-acl-form", {"resource_type": "group", "resource_name": "billing-",
                                        "pattern_type": "prefixed", "principal": f"User:{bob}",
                                        "operation": "read", "permission": "deny"},
             "Create an ACL", f"Created the ACL: deny User:{bob} from host *: read on group billing- (prefixed).")
        row = f'#acls tr[data-principal="User:{bob}"]'
        assert page.locator(f"{row} td").all_inner_texts()[:7] == ["group", "billing-", "prefixed", f"User:{bob}",
                                                                   "*", "read", "deny"]
        with _scram_admin(sasl, "admin") as admin:
            assert [a.principal for a in admin.describe_acls() if a.principal == f"User:{bob}"] == [f"User:{bob}"]
        _row_action(page, row, f"Deleted 1 ACL: deny User:{bob} from host *: read on group billing- (prefixed).")
        assert page.locator(row).count() == 0

        # a SCRAM credential, which then logs in to the console
        page.goto(console.url + "/users")
        page.click("#set-password")
        for name, value in {"user": bob, "mechanism": "SCRAM-SHA-512", "password": bob_password,
                            "iterations": "4096"}.items():
            field = page.locator(f"#set-password-form [name={name}]")
            field.select_option(value) if name == "mechanism" else field.fill(value)
        page.click("#set-password-form button[type=submit]")
        page.wait_for_selector("#action-title")
        assert page.inner_text("#action-title") == f"Set the password of {bob}"
        assert bob_password not in page.content()                 # the confirmation page does not carry it
        page.click("#confirm-button")
        page.wait_for_selector("#notice")
        assert page.inner_text("#notice") == f"Set the SCRAM-SHA-512 password of {bob}."
        assert page.locator(f'#users tr[data-user="{bob}"] td').all_inner_texts()[:3] == [bob, "SCRAM-SHA-512",
                                                                                          "4096"]
        other = headless_chromium.new_context()
        try:
            bob_page = other.new_page()
            deadline = time.monotonic() + 20
            while True:   # the credential reaches every broker through the metadata log
                bob_page.goto(console.url + "/login")
                bob_page.fill("#login-form [name=username]", bob)
                bob_page.fill("#login-form [name=password]", bob_password)
                bob_page.select_option("#login-form [name=mechanism]", "SCRAM-SHA-512")
                bob_page.click("#login-button")
                bob_page.wait_for_load_state()
                if bob_page.locator("#user").count():
                    break
                assert time.monotonic() < deadline, bob_page.inner_text("main")
                time.sleep(0.5)
            assert bob_page.inner_text("#user") == bob
        finally:
            other.close()
        _row_action(page, f'#users tr[data-user="{bob}"]', f"Deleted the SCRAM-SHA-512 credential of {bob}.")
        assert page.locator(f'#users tr[data-user="{bob}"]').count() == 0

        # a quota
        page.goto(console.url + "/quotas")
        page.click("#set-quota")
        _act(page, "#set-quota-form", {"entity_type": "user", "entity_name": bob, "key": "consumer_byte_rate",
                                       "value": "2048"},
             f"Set a quota of user={bob}", f"Set consumer_byte_rate = 2048 for user={bob}.")
        row = f'#quotas tr[data-entity="user={bob}"]'
        assert page.locator(f"{row} td").all_inner_texts()[:3] == [f"user={bob}", "consumer_byte_rate", "2048"]
        with _scram_admin(sasl, "admin") as admin:
            assert admin.describe_client_quotas({"user": bob}) == {(("user", bob),): {"consumer_byte_rate": 2048.0}}
        _row_action(page, row, f"Removed consumer_byte_rate of user={bob}.")
        assert page.locator(row).count() == 0
        for url, body in bodies:
            assert bob_password.encode() not in body and bob_password not in url, url
    finally:
        context.close()


# ---- sessions over plain HTTP: logout and expiry ----------------------------------------------------------

def _connection(url: str, context: ssl.SSLContext | None = None) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port, timeout=60, context=context)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)


def _request(url: str, method: str, path: str, *, cookie: str | None = None, form: dict[str, str] | None = None,
             context: ssl.SSLContext | None = None, origin: str | None = None) -> http.client.HTTPResponse:
    conn = _connection(url, context)
    headers = {"Cookie": cookie} if cookie else {}
    if origin is not None:
        headers["Origin"] = origin
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def _http_log_in(url: str, user: str, context: ssl.SSLContext | None = None, secure: bool = False) -> str:
    """A session cookie ("name=value") from the login form."""
    conn = _connection(url, context)
    conn.request("GET", "/login")
    page = conn.getresponse().read().decode()
    conn.close()
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token, page
    answer = _request(url, "POST", "/login", form={"csrf": token.group(1), "username": user,
                                                   "password": PASSWORDS[user], "mechanism": MECHANISM},
                      context=context, origin=url)
    assert answer.status == 303, answer.status
    set_cookie = answer.getheader("Set-Cookie") or ""
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    assert ("; Secure" in set_cookie) == secure, set_cookie
    return set_cookie.split(";")[0]


def _session_token(url: str, cookie: str) -> str:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.request("GET", "/groups", headers={"Cookie": cookie})
    page = conn.getresponse().read().decode()
    conn.close()
    token = re.search(r'id="logout-form"><input type="hidden" name="csrf" value="([^"]+)"', page)
    assert token, page
    return token.group(1)


def test_logout_ends_the_session_and_the_old_cookie_no_longer_works(secured: Any) -> None:
    _, console, _, _ = secured
    cookie = _http_log_in(console.url, "admin")
    assert _request(console.url, "GET", "/topics", cookie=cookie).status == 200
    token = _session_token(console.url, cookie)
    out = _request(console.url, "POST", "/logout", cookie=cookie, form={"csrf": token})
    assert out.status == 303 and out.getheader("Location") == "/login?out=1"
    assert "Max-Age=0" in (out.getheader("Set-Cookie") or "")
    again = _request(console.url, "GET", "/topics", cookie=cookie)
    assert again.status == 303 and again.getheader("Location", "").startswith("/login?next=%2Ftopics")
    assert _request(console.url, "GET", "/api/topics/x/messages", cookie=cookie).status == 401
    assert _request(console.url, "POST", "/topics", cookie=cookie, form={"csrf": token, "name": "t"}).status == 401
    assert _request(console.url, "GET", "/topics").status == 303                   # no cookie at all: login
    assert _request(console.url, "GET", "/static/console.css").status == 200       # static files need none


def test_an_idle_session_expires_to_the_login_page(secured: Any) -> None:
    sasl, _, config, _ = secured
    console = console_process(sasl, config, "--session-idle-timeout", "2")
    try:
        cookie = _http_log_in(console.url, "admin")
        assert _request(console.url, "GET", "/", cookie=cookie).status == 200
        time.sleep(3.0)
        expired = _request(console.url, "GET", "/", cookie=cookie)
        assert expired.status == 303 and expired.getheader("Location") == "/login?ended=1", "\n".join(console.lines)
        deadline = time.monotonic() + 10
        while not any("session of admin ended: expired" in line for line in console.lines):
            assert time.monotonic() < deadline, console.lines
            time.sleep(0.2)
    finally:
        assert console.stop() == 0


def test_login_over_sasl_ssl_with_the_console_served_over_https(secured: Any, pki: Any, tmp_path: Path) -> None:
    _, _, _, sasl_ssl = secured
    config = tmp_path / "console-ssl.properties"
    config.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={pki['ca'].ca_file}\n"
                      "sasl.mechanism=SCRAM-SHA-256\ndefault.api.timeout.ms=15000\n")
    console = console_process(sasl_ssl, config, "--https-cert", pki["console"].cert_file,
                             "--https-key", pki["console"].key_file)
    try:
        assert console.url.startswith("https://")
        context = ssl.create_default_context(cafile=pki["ca"].ca_file)
        # the form offers only the mechanism the config names
        conn = _connection(console.url, context)
        conn.request("GET", "/login")
        form = conn.getresponse().read().decode()
        conn.close()
        assert re.findall(r'<option value="([^"]+)">', form) == ["SCRAM-SHA-256"]
        cookie = _http_log_in(console.url, "alice", context, secure=True)
        conn = _connection(console.url, context)
        conn.request("GET", "/topics", headers={"Cookie": cookie})
        page = conn.getresponse()
        body = page.read().decode()
        conn.close()
        assert page.status == 200 and f'data-topic="{PUBLIC}"' in body and SECRET not in body
        # a POST from the plain-HTTP origin of the same host is another origin
        token = re.search(r'id="logout-form"><input type="hidden" name="csrf" value="([^"]+)"', body)
        assert token is not None
        other = _request(console.url, "POST", "/logout", cookie=cookie, form={"csrf": token.group(1)},
                         context=context, origin=console.url.replace("https://", "http://"))
        assert other.status == 403
        out = _request(console.url, "POST", "/logout", cookie=cookie, form={"csrf": token.group(1)},
                       context=context, origin=console.url)
        assert out.status == 303
    finally:
        assert console.stop() == 0


def test_reset_offsets_is_offered_only_to_a_user_with_read_on_the_group(secured: Any, headless_chromium: Any) -> None:
    """DescribeGroups' authorized operations decide: with Describe on the group alone, alice sees the group and its
    offsets but no reset form (it needs Read); once an ACL gives her Read, the form is there."""
    from confluent_kafka import Consumer, TopicPartition

    sasl, console, _, _ = secured
    group = f"console-group-{uuid.uuid4().hex[:6]}"
    committer = Consumer({"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": MECHANISM, "sasl.username": "admin", "sasl.password": PASSWORDS["admin"],
                          "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(PUBLIC, 0, 0)], asynchronous=False)
    finally:
        committer.close()
    describe = AclBinding("group", group, "User:alice", "describe")
    read = AclBinding("group", group, "User:alice", "read")
    with _scram_admin(sasl, "admin") as admin:
        admin.create_acls([describe])
    context = headless_chromium.new_context()
    page = context.new_page()
    try:
        _log_in(page, console.url, "alice", PASSWORDS["alice"])
        page.goto(f"{console.url}/groups/{group}")
        assert page.locator("#reset-offsets-form").count() == 0
        assert "needs Read on the group" in page.inner_text("#no-actions")
        with _scram_admin(sasl, "admin") as admin:
            admin.create_acls([read])
        deadline = time.monotonic() + 15   # the ACL reaches the group's coordinator
        while page.locator("#reset-offsets-form").count() == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
            page.goto(f"{console.url}/groups/{group}")
        assert page.locator("#reset-offsets-form").count() == 1
    finally:
        context.close()
        with _scram_admin(sasl, "admin") as admin:
            from klog.client.admin import AclBindingFilter

            admin.delete_acls([AclBindingFilter("group", group)])
