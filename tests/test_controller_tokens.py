"""Delegation tokens decided by the controller (klog.controller.tokens, Kafka's DelegationTokenControlManager) on a
metadata image, and the SCRAM ``tokenauth=true`` login a broker derives from them (klog.security.tokens): pure,
no sockets."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from klog.controller.tokens import (
    TokenSettings,
    create_delegation_token,
    expire_delegation_token,
    expired_tokens,
    renew_delegation_token,
)
from klog.metadata.delta import MetadataDelta
from klog.metadata.image import MetadataImage
from klog.protocol.errors import ErrorCode
from klog.protocol.struct import Struct
from klog.security.principal import KafkaPrincipal
from klog.security.sasl import AuthenticationFailed, SaslSession
from klog.security.scram import ScramClient
from klog.security.tokens import TokenCredentials, token_hmac, token_password

SECRET = "s3cret"
SETTINGS = TokenSettings(SECRET, max_lifetime_ms=10_000, expiry_time_ms=1_000)
ALICE, BOB, CAROL = (KafkaPrincipal("User", n) for n in ("alice", "bob", "carol"))
NOW = 1_000_000


def _request(renewers=(), max_lifetime_ms=-1):
    return Struct(owner_principal_type=None, owner_principal_name=None, max_lifetime_ms=max_lifetime_ms,
                  renewers=[Struct(principal_type=t, principal_name=n) for t, n in renewers])


def _apply(image, records):
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply()[0]


def _with_token(renewers=(("User", "bob"),), max_lifetime_ms=-1):
    result = create_delegation_token(_request(renewers, max_lifetime_ms), ALICE, ALICE, SETTINGS, NOW,
                                     token_id="tok-1")
    return _apply(MetadataImage(), result.records), result.response


def test_kafkas_hmac_is_hmac_sha512_of_the_token_id_keyed_by_the_secret():
    assert token_hmac(SECRET, "tok-1") == hmac.new(b"s3cret", b"tok-1", hashlib.sha512).digest()
    assert token_password(SECRET, "tok-1") == base64.b64encode(token_hmac(SECRET, "tok-1")).decode()


def test_a_created_token_is_a_record_without_its_hmac_and_the_answer_carries_it():
    image, response = _with_token()
    assert response["error_code"] == ErrorCode.NONE and response["hmac"] == token_hmac(SECRET, "tok-1")
    token = image.delegation_tokens["tok-1"]
    assert (token.owner, token.requester, token.renewers) == ("User:alice", "User:alice", ("User:bob",))
    # expiry: delegation.token.expiry.time.ms from now; max: delegation.token.max.lifetime.ms
    assert (token.issue_timestamp, token.expiration_timestamp, token.max_timestamp) == (NOW, NOW + 1_000,
                                                                                       NOW + 10_000)


def test_a_requested_max_lifetime_only_shortens_the_configured_one():
    assert _with_token(max_lifetime_ms=500)[1]["max_timestamp_ms"] == NOW + 500
    assert _with_token(max_lifetime_ms=500)[1]["expiry_timestamp_ms"] == NOW + 500
    assert _with_token(max_lifetime_ms=99_999)[1]["max_timestamp_ms"] == NOW + 10_000


def test_without_a_secret_key_tokens_are_disabled():
    disabled = TokenSettings(None, 10_000, 1_000)
    result = create_delegation_token(_request(), ALICE, ALICE, disabled, NOW)
    assert result.response["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED and not result.records
    image, _ = _with_token()
    assert renew_delegation_token(token_hmac(SECRET, "tok-1"), 0, ALICE, disabled, image, NOW).response[
        "error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_renewers_must_be_users():
    result = create_delegation_token(_request([("Group", "g")]), ALICE, ALICE, SETTINGS, NOW)
    assert result.response["error_code"] == ErrorCode.INVALID_PRINCIPAL_TYPE and not result.records


def test_renew_by_owner_or_renewer_moves_the_expiry_never_past_the_max():
    image, response = _with_token()
    mac = response["hmac"]
    renewed = renew_delegation_token(mac, 700, BOB, SETTINGS, image, NOW + 500)
    assert renewed.response == {"error_code": ErrorCode.NONE, "expiry_timestamp_ms": NOW + 1_200,
                                "throttle_time_ms": 0}
    image = _apply(image, renewed.records)
    assert image.delegation_tokens["tok-1"].expiration_timestamp == NOW + 1_200
    # a period above delegation.token.expiry.time.ms (or none) is that; never past max_timestamp
    assert renew_delegation_token(mac, 0, ALICE, SETTINGS, image, NOW + 1_000).response[
        "expiry_timestamp_ms"] == NOW + 2_000
    assert renew_delegation_token(mac, 0, ALICE, SETTINGS, image, NOW + 1_100).records
    late = _apply(image, renew_delegation_token(mac, 0, ALICE, SETTINGS, image, NOW + 1_100).records)
    assert renew_delegation_token(mac, 0, ALICE, SETTINGS, late, NOW + 2_050).response[
        "expiry_timestamp_ms"] == NOW + 3_050
    assert renew_delegation_token(mac, 5_000, CAROL, SETTINGS, image, NOW).response[
        "error_code"] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH


@pytest.mark.parametrize("decide", [
    lambda mac, who, image, now: renew_delegation_token(mac, 0, who, SETTINGS, image, now),
    lambda mac, who, image, now: expire_delegation_token(mac, 0, who, SETTINGS, image, now)])
def test_unknown_and_expired_tokens_are_refused(decide):
    image, response = _with_token()
    assert decide(b"nope", ALICE, image, NOW).response["error_code"] == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert decide(response["hmac"], ALICE, image, NOW + 1_001).response[
        "error_code"] == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_expire_now_removes_the_token_and_a_period_sets_its_expiry():
    image, response = _with_token()
    later = expire_delegation_token(response["hmac"], 300, ALICE, SETTINGS, image, NOW)
    assert later.response["expiry_timestamp_ms"] == NOW + 300
    assert _apply(image, later.records).delegation_tokens["tok-1"].expiration_timestamp == NOW + 300
    now = expire_delegation_token(response["hmac"], -1, BOB, SETTINGS, image, NOW)
    assert now.response["expiry_timestamp_ms"] == NOW   # Kafka 4.3 answers the time of the removal
    assert "tok-1" not in _apply(image, now.records).delegation_tokens


def test_expire_checks_the_principal_before_the_expiry_and_removes_an_expired_token():
    """Kafka's expireDelegationToken: not found, then owner/renewer, then (a negative period) the removal even of an
    expired token, else EXPIRED; Renew refuses an expired token before the principal. Refusals answer expiry 0."""
    image, response = _with_token()
    mac, late = response["hmac"], NOW + 1_001
    assert expire_delegation_token(mac, -1, CAROL, SETTINGS, image, late).response == {
        "error_code": ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, "expiry_timestamp_ms": 0, "throttle_time_ms": 0}
    assert renew_delegation_token(mac, 0, CAROL, SETTINGS, image, late).response == {
        "error_code": ErrorCode.DELEGATION_TOKEN_EXPIRED, "expiry_timestamp_ms": 0, "throttle_time_ms": 0}
    assert expire_delegation_token(mac, 0, ALICE, SETTINGS, image, late).response == {
        "error_code": ErrorCode.DELEGATION_TOKEN_EXPIRED, "expiry_timestamp_ms": 0, "throttle_time_ms": 0}
    removed = expire_delegation_token(mac, -5, ALICE, SETTINGS, image, late)
    assert removed.response["expiry_timestamp_ms"] == late
    assert "tok-1" not in _apply(image, removed.records).delegation_tokens


def test_refusals_answer_kafkas_times():
    """A renewer that is not a User is refused before a disabled feature (Kafka's broker checks it, times -1); the
    controller's refusals answer its response defaults (times 0)."""
    disabled = TokenSettings(None, 10_000, 1_000)
    result = create_delegation_token(_request([("Group", "g")]), ALICE, ALICE, disabled, NOW).response
    assert (result["error_code"], result["issue_timestamp_ms"], result["max_timestamp_ms"]) == (
        ErrorCode.INVALID_PRINCIPAL_TYPE, -1, -1)
    result = create_delegation_token(_request(), ALICE, ALICE, disabled, NOW).response
    assert (result["error_code"], result["issue_timestamp_ms"], result["expiry_timestamp_ms"],
            result["max_timestamp_ms"], result["token_id"], result["hmac"]) == (
        ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0, 0, 0, "", b"")
    image, _ = _with_token()
    for decide in (renew_delegation_token, expire_delegation_token):
        assert decide(b"nope", 0, ALICE, SETTINGS, image, NOW).response["expiry_timestamp_ms"] == 0


def test_the_periodic_check_removes_only_expired_tokens():
    image, _ = _with_token()
    assert expired_tokens(image, NOW + 1_000).records == []
    swept = expired_tokens(image, NOW + 1_001)
    assert swept.response == ["tok-1"] and _apply(image, swept.records).delegation_tokens == {}


def _token_login(session, token_id, password, mechanism="SCRAM-SHA-512"):
    client = ScramClient(mechanism, token_id, password, extensions={"tokenauth": "true"})
    assert session.handshake(mechanism)
    server_first = session.authenticate(client.first())
    client.verify(session.authenticate(client.final(server_first)))


def test_a_scram_tokenauth_login_is_the_token_owners_and_marked_token_authenticated():
    image, _ = _with_token()
    now = [NOW]
    tokens = TokenCredentials(SECRET, lambda: image.delegation_tokens, lambda: now[0])
    session = SaslSession(["SCRAM-SHA-512"], {}, lambda m, u: None, tokens.lookup)
    _token_login(session, "tok-1", token_password(SECRET, "tok-1"))
    assert session.principal == ALICE and session.principal.token_authenticated
    assert session.credential_expiry_ms == NOW + 1_000

    for token_id, password in (("tok-1", "wrong"), ("tok-2", token_password(SECRET, "tok-2"))):
        with pytest.raises(AuthenticationFailed, match="invalid credentials"):
            _token_login(SaslSession(["SCRAM-SHA-512"], {}, lambda m, u: None, tokens.lookup), token_id, password)
    now[0] = NOW + 1_001   # expired: refused even before the periodic check removes it
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        _token_login(SaslSession(["SCRAM-SHA-512"], {}, lambda m, u: None, tokens.lookup), "tok-1",
                     token_password(SECRET, "tok-1"))
