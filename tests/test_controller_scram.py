"""AlterUserScramCredentials / DescribeUserScramCredentials decided on a metadata image (Kafka's
ScramControlManager's rules and error codes), without sockets."""

from __future__ import annotations

from types import SimpleNamespace as NS

from klog.controller.scram import alter_user_scram_credentials, describe_user_scram_credentials
from klog.metadata.delta import replay
from klog.metadata.image import MetadataImage
from klog.protocol.errors import ErrorCode
from klog.security.scram import ScramClient, ScramServer, salted_password


def upsert(name, mechanism=2, iterations=4096, password="pw", salt=b"s" * 16):
    mech = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-512")
    return NS(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
              salted_password=salted_password(mech, password, salt, max(iterations, 1)))


def test_upsert_login_describe_delete():
    image = MetadataImage()
    # one alteration per user and request, so alice's second mechanism takes a second request
    result = alter_user_scram_credentials([], [upsert("alice"), upsert("bob", 1, 8192)], image)
    assert [(r["user"], r["error_code"]) for r in result.response] == [("alice", 0), ("bob", 0)]
    image, _ = replay(image, list(result.records))
    result = alter_user_scram_credentials([], [upsert("alice", 1)], image)
    assert [(r["user"], r["error_code"]) for r in result.response] == [("alice", 0)]
    image, _ = replay(image, list(result.records))
    stored = image.scram_credentials[("alice", 2)]
    client = ScramClient("SCRAM-SHA-512", "alice", "pw")
    server = ScramServer("SCRAM-SHA-512", lambda user: stored)
    client.verify(server.final(client.final(server.first(client.first()))))

    described = describe_user_scram_credentials(None, image)["results"]
    assert [(r["user"], r["credential_infos"]) for r in described] == [
        ("alice", [{"mechanism": 1, "iterations": 4096}, {"mechanism": 2, "iterations": 4096}]),
        ("bob", [{"mechanism": 1, "iterations": 8192}])]
    described = describe_user_scram_credentials(["bob", "carol", "bob"], image)["results"]
    assert [(r["user"], r["error_code"]) for r in described] == [
        ("bob", ErrorCode.DUPLICATE_RESOURCE), ("carol", ErrorCode.RESOURCE_NOT_FOUND)]

    result = alter_user_scram_credentials([NS(name="alice", mechanism=1), NS(name="bob", mechanism=2)], [], image)
    assert [(r["user"], r["error_code"]) for r in result.response] == [
        ("alice", 0), ("bob", ErrorCode.RESOURCE_NOT_FOUND)]
    image, _ = replay(image, list(result.records))
    assert set(image.scram_credentials) == {("alice", 2), ("bob", 1)}


def test_invalid_items_change_nothing_for_their_user():
    result = alter_user_scram_credentials(
        [NS(name="dup", mechanism=2)],
        [upsert("few", iterations=100), upsert("many", iterations=20000), upsert("", 2), upsert("mech", 7),
         upsert("dup", 2), upsert("ok"), upsert("nosalt", salt=b""), NS(name="nosalted", mechanism=2, iterations=4096, salt=b"s", salted_password=b"")], MetadataImage())
    codes = {r["user"]: (r["error_code"], r["error_message"]) for r in result.response}
    assert codes["few"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert codes["many"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert codes[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert codes["mech"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert codes["dup"][0] == ErrorCode.RESOURCE_NOT_FOUND   # the deletion comes first and fails
    assert codes["nosalt"] == (0, None)   # as Kafka's: an empty salt is stored; an empty salted password fails
    assert codes["nosalted"] == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    assert codes["ok"] == (0, None)
    assert [r.data.name for r in result.records] == ["ok", "nosalt"]


def test_describe_client_quotas_matches_entities_as_kafka():
    from klog.controller.scram import describe_client_quotas
    from klog.metadata.records import record

    def quota(entity, key, value):
        return record("ClientQuotaRecord", entity=[{"entity_type": t, "entity_name": n} for t, n in entity],
                      key=key, value=value, remove=False)

    image, _ = replay(MetadataImage(), [
        quota([("user", "alice")], "producer_byte_rate", 1024.0),
        quota([("user", None)], "producer_byte_rate", 512.0),
        quota([("user", "alice"), ("client-id", "app")], "consumer_byte_rate", 2048.0)])

    def users(*components, strict=False):
        answer = describe_client_quotas([NS(entity_type=t, match_type=m, match=n) for t, m, n in components],
                                        strict, image)
        return sorted((tuple(sorted((e["entity_type"], e["entity_name"] or "<default>") for e in entry["entity"]))
                       for entry in answer["entries"]))

    assert users(("user", 0, "alice")) == [(("client-id", "app"), ("user", "alice")), (("user", "alice"),)]
    assert users(("user", 0, "alice"), strict=True) == [(("user", "alice"),)]
    assert users(("user", 1, None)) == [(("user", "<default>"),)]
    assert users(("user", 2, None), strict=True) == [(("user", "<default>"),), (("user", "alice"),)]
    assert len(users()) == 3
    bad = describe_client_quotas([NS(entity_type="user", match_type=0, match="a")] * 2, False, image)
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST and bad["entries"] is None


def test_a_user_altered_twice_in_one_request_fails_whole_and_others_proceed():
    image = MetadataImage()
    result = alter_user_scram_credentials([], [upsert("alice", 1), upsert("alice", 2), upsert("bob")], image)
    assert [(r["user"], r["error_code"]) for r in result.response] == [   # successes first, as Kafka's
        ("bob", 0), ("alice", ErrorCode.DUPLICATE_RESOURCE)]
    assert [r.data.name for r in result.records] == ["bob"]
    image, _ = replay(image, list(result.records))
    result = alter_user_scram_credentials([NS(name="bob", mechanism=2), NS(name="bob", mechanism=1)], [], image)
    assert [(r["user"], r["error_code"]) for r in result.response] == [("bob", ErrorCode.DUPLICATE_RESOURCE)]
    assert not result.records
