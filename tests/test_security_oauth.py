"""SASL/OAUTHBEARER without sockets (klog.security.oauth): the client's message, Kafka's unsecured JWS validator
and its options, the JWKS validator (keys made here, read from a file: URL), and the RFC 7628 error exchange of a
refused token."""

from __future__ import annotations

import base64
import json
import time

import pytest

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from klog.security.oauth import (
    JwksValidator,
    OAuthBearerServer,
    TokenRefused,
    UnsecuredValidator,
    parse_client_response,
)
from klog.security.sasl import AuthenticationFailed, SaslSession

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def unsecured(claims, header=None) -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}."


def client_message(token: str, authzid: str = "", **extensions: str) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


def test_the_client_message_gives_authzid_token_and_extensions():
    assert parse_client_response(client_message("abc.def.", "alice", traceId="7")) == (
        "alice", "abc.def.", {"traceId": "7"})
    for bad in (b"", b"n,,\x01\x01", b"n,,\x01auth=Basic x\x01\x01", b"p,,\x01auth=Bearer x\x01\x01",
                b"n,,\x01auth=Bearer x\x01", b"n,,\x01noequals\x01\x01"):
        with pytest.raises(ValueError):
            parse_client_response(bad)


def test_the_unsecured_validator_checks_principal_times_and_scope_with_kafkas_options():
    validator = UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka",
                                    "unsecuredValidatorAllowableClockSkewMs": "1000"})
    good = {"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S, "scope": ["kafka", "other"]}
    token = validator.validate(unsecured(good), NOW_MS)
    assert (token.principal_name, token.lifetime_ms) == ("alice", (NOW_S + 60) * 1000)
    # a string claim is one scope, not split (Kafka's OAuthBearerUnsecuredJws)
    assert validator.validate(unsecured({**good, "scope": "kafka"}), NOW_MS).scope == {"kafka"}
    with pytest.raises(TokenRefused):
        validator.validate(unsecured({**good, "scope": "kafka other"}), NOW_MS)
    no_iat = {k: v for k, v in good.items() if k != "iat"}
    assert validator.validate(unsecured({**no_iat, "exp": NOW_S}), NOW_MS + 999)   # within the clock skew
    refusals = {
        "expired": {**good, "exp": NOW_S - 2},
        "no exp": {k: v for k, v in good.items() if k != "exp"},
        "no sub": {k: v for k, v in good.items() if k != "sub"},
        "iat in the future": {**good, "iat": NOW_S + 30},
        "exp before iat": {**good, "iat": NOW_S - 10, "exp": NOW_S - 20},
    }
    for why, claims in refusals.items():
        with pytest.raises(TokenRefused) as refused:
            validator.validate(unsecured(claims), NOW_MS)
        assert refused.value.status == "invalid_token", why
    with pytest.raises(TokenRefused) as scope:
        validator.validate(unsecured({**good, "scope": "other"}), NOW_MS)
    assert scope.value.json() == '{"status":"insufficient_scope", "scope":"[kafka]"}'
    with pytest.raises(TokenRefused):
        validator.validate(unsecured(good, {"alg": "HS256"}), NOW_MS)
    with pytest.raises(TokenRefused):
        validator.validate(unsecured(good) + "sig", NOW_MS)
    other_claim = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "upn"})
    assert other_claim.validate(unsecured({"upn": "bob", "exp": NOW_S + 5}), NOW_MS).principal_name == "bob"


def _jwks_file(tmp_path, *keys):
    jwks = {"keys": [{**json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(k.public_key())),
                      "kid": kid, "alg": alg, "use": "sig"} for kid, alg, k in keys]}
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    return path


def test_the_jwks_validator_checks_signature_audience_issuer_and_expiry(tmp_path):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = _jwks_file(tmp_path, ("k1", "RS256", rsa_key), ("k2", "ES256", ec_key))
    validator = JwksValidator(path.as_uri(), expected_audience=["kafka"], expected_issuer="https://idp",
                              clock_skew_s=5, clock=time.time)
    now = int(time.time())
    claims = {"sub": "svc", "aud": "kafka", "iss": "https://idp", "iat": now, "exp": now + 60, "scope": ["a", "b"]}

    def signed(key, kid, alg="RS256", **over):
        return jwt.encode({**claims, **over}, key, algorithm=alg, headers={"kid": kid})

    token = validator.validate(signed(rsa_key, "k1"), now * 1000)
    assert (token.principal_name, token.scope) == ("svc", {"a", "b"})
    assert validator.validate(signed(ec_key, "k2", "ES256"), now * 1000).principal_name == "svc"
    for bad in (signed(stranger, "k1"), signed(rsa_key, "k9"), signed(rsa_key, "k1", aud="other"),
                signed(rsa_key, "k1", iss="https://evil"), signed(rsa_key, "k1", exp=now - 60),
                signed(rsa_key, "k1", iat=None), unsecured(claims),
                jwt.encode(claims, "shared-secret-of-at-least-32-bytes!!", algorithm="HS256",
                           headers={"kid": "k1"})):
        with pytest.raises(TokenRefused):
            validator.validate(bad, now * 1000)


def test_a_refused_token_is_answered_with_the_rfc7628_error_then_fails_on_the_clients_ack():
    session = SaslSession(["OAUTHBEARER"], {}, lambda m, u: None,
                          oauth_validator=UnsecuredValidator({}), now_ms=lambda: NOW_MS)
    assert session.handshake("OAUTHBEARER")
    answer = session.authenticate(client_message(unsecured({"sub": "alice", "exp": NOW_S - 1})))
    assert answer == b'{"status":"invalid_token"}' and session.principal is None
    with pytest.raises(AuthenticationFailed) as failed:
        session.authenticate(b"\x01")
    assert str(failed.value) == '{"status":"invalid_token"}'
    assert "exp" in failed.value.log_reason


def test_an_accepted_token_is_the_principal_and_bounds_the_session():
    session = SaslSession(["OAUTHBEARER"], {}, lambda m, u: None,
                          oauth_validator=UnsecuredValidator({}), now_ms=lambda: NOW_MS)
    assert session.handshake("OAUTHBEARER")
    assert session.authenticate(client_message(unsecured({"sub": "alice", "exp": NOW_S + 9}))) == b""
    assert str(session.principal) == "User:alice" and session.credential_expiry_ms == (NOW_S + 9) * 1000
    mismatch = SaslSession(["OAUTHBEARER"], {}, lambda m, u: None, oauth_validator=UnsecuredValidator({}),
                           now_ms=lambda: NOW_MS)
    mismatch.handshake("OAUTHBEARER")
    with pytest.raises(AuthenticationFailed, match="authorization id"):
        mismatch.authenticate(client_message(unsecured({"sub": "alice", "exp": NOW_S + 9}), "bob"))


def test_the_session_lifetime_is_kafkas_rule_for_every_listener():
    """SaslSession.session_lifetime_ms, what the broker and controller listeners both use (KIP-368 as Kafka's
    SaslServerAuthenticator): connections.max.reauth.ms, no later than the token, which ends the session also when
    connections.max.reauth.ms is 0; a credential without an expiry and no setting: never (None)."""
    token = SaslSession(["OAUTHBEARER"], {}, lambda m, u: None, oauth_validator=UnsecuredValidator({}),
                        now_ms=lambda: NOW_MS)
    assert token.session_lifetime_ms(600_000) is None   # nobody logged in yet
    token.handshake("OAUTHBEARER")
    token.authenticate(client_message(unsecured({"sub": "alice", "exp": NOW_S + 9})))
    left = (NOW_S + 9) * 1000 - NOW_MS
    assert token.session_lifetime_ms(600_000) == left
    assert token.session_lifetime_ms(0) == left
    assert token.session_lifetime_ms(1_000) == 1_000
    assert token.session_lifetime_ms(600_000, now_ms=(NOW_S + 10) * 1000) == 0   # expired: ends at once
    plain = SaslSession(["PLAIN"], {"bob": "pw"}, lambda m, u: None)
    plain.handshake("PLAIN")
    plain.authenticate(b"\0bob\0pw")
    assert plain.session_lifetime_ms(0) is None and plain.session_lifetime_ms(5_000) == 5_000


def test_oauthbearer_is_offered_only_with_a_validator():
    assert not SaslSession(["OAUTHBEARER"], {}, lambda m, u: None).handshake("OAUTHBEARER")
    assert OAuthBearerServer(UnsecuredValidator({}), lambda: NOW_MS).token is None
