"""Feature versioning (KIP-584/KIP-1022) on klog and on Apache Kafka 4.3 from the same format arguments: Kafka's own
``kafka-features describe|upgrade|downgrade`` (org.apache.kafka.tools.FeatureCommand) runs the same scenario on
both and gets the same answers (UpdateFeatures, forwarded to the controller; DescribeFeatures through ApiVersions
v3+), and the features gate the protocols as in Kafka (share groups need share.version 1, the consumer protocol
group.version 1). The controller's decisions are also checked without sockets (klog.controller.features)."""

from __future__ import annotations

import re
import subprocess

import pytest

from klog.controller.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, FeatureUpdate, update_features
from klog.metadata import MetadataImage
from klog.protocol.errors import ErrorCode
from klog.testing import kafka_tools as kt
from klog.testing.kafka import apache_kafka, find_kafka_libs, free_port
from klog.testing.process import BrokerProcess, broker_command
from klog.testing.wire import WireClient

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
#: both clusters start at Kafka 4.0's levels, transaction.version 1 (transaction protocol v1)
FORMAT_ARGS = ["--release-version", "4.0", "--feature", "transaction.version=1"]
CLUSTER_ID = "c3VwZXJmZWF0dXJlcy0wMQ"


# ---- the controller's decisions, without sockets ---------------------------------------------------------------

def _image(**features: int) -> MetadataImage:
    return MetadataImage(features={k.replace("_", "."): v for k, v in features.items()})


def _decide(image: MetadataImage, *updates: tuple[str, int, int], validate_only: bool = False):
    return update_features([FeatureUpdate(*u) for u in updates], image, node_id=1, kraft_version=1,
                           validate_only=validate_only)


def test_metadata_version_downgrades_only_across_levels_without_metadata_changes() -> None:
    image = _image(metadata_version=25)
    ok = _decide(image, ("metadata.version", 24, SAFE_DOWNGRADE))
    assert ok.response is None and [(r.data.name, r.data.feature_level) for r in ok.records] == [
        ("metadata.version", 24)]
    refused = _decide(image, ("metadata.version", 22, SAFE_DOWNGRADE)).response
    assert refused is not None and refused.code == ErrorCode.INVALID_UPDATE_VERSION
    assert refused.message == ("The update failed for all features since the following feature had an error: "
                               "Unsupported metadata.version downgrade from 25 to 22. Refusing to perform the "
                               "requested downgrade because it might delete metadata information.")
    unsafe = _decide(image, ("metadata.version", 22, UNSAFE_DOWNGRADE)).response
    assert unsafe is not None and unsafe.message.endswith("Unsafe metadata downgrade is not supported in this version.")


def test_a_refused_update_fails_the_whole_request_and_validate_only_writes_nothing() -> None:
    image = _image(metadata_version=25, group_version=1)
    both = _decide(image, ("share.version", 1, UPGRADE), ("group.version", 0, UPGRADE))
    assert both.records == [] and both.response is not None
    assert both.response.message.endswith("Invalid update version 0 for feature group.version. Can't downgrade the "
                                          "version of this feature without setting the upgrade type to either safe "
                                          "or unsafe downgrade.")
    dry = _decide(image, ("share.version", 1, UPGRADE), validate_only=True)
    assert dry.response is None and dry.records == []
    down = _decide(image, ("group.version", 0, SAFE_DOWNGRADE))
    assert [(r.data.name, r.data.feature_level) for r in down.records] == [("group.version", 0)]


@pytest.mark.parametrize("update, why", [
    (("share.version", 1, 5), "Invalid update version 1 for feature share.version. The controller does not support "
                              "the given upgrade type."),
    (("group.version", -1, UNSAFE_DOWNGRADE), "A feature version cannot be less than 0."),
    (("share.version", 9, UPGRADE), "Local controller 1 only supports versions 0-1"),
    (("nope.version", 1, UPGRADE), "Local controller 1 does not support this feature."),
    (("streams.version", 2, UPGRADE), "Local controller 1 only supports versions 0-1"),
    (("transaction.version", 3, UPGRADE), "Local controller 1 only supports versions 0-2"),
    (("kraft.version", 0, SAFE_DOWNGRADE), "Can't downgrade the version of this feature."),
    (("metadata.version", 31, UPGRADE), "Local controller 1 only supports versions 7-30"),
    (("eligible.leader.replicas.version", 1, UPGRADE),
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"),
])
def test_unsupported_levels_are_refused_with_kafkas_messages(update, why) -> None:
    refusal = _decide(_image(metadata_version=22), update).response
    assert refusal is not None and refusal.code == ErrorCode.INVALID_UPDATE_VERSION and refusal.message.endswith(why)


def test_a_level_a_registered_broker_does_not_support_is_refused() -> None:
    """A broker still on an older version (rolling upgrade): the controller refuses what it cannot run."""
    import dataclasses
    import uuid

    from klog.metadata.image import BrokerRegistration

    old = BrokerRegistration(2, 10, uuid.uuid4(), (), (("metadata.version", 7, 25), ("share.version", 0, 0)), None,
                             False, False)
    image = dataclasses.replace(_image(metadata_version=25), brokers={2: old})
    share = _decide(image, ("share.version", 1, UPGRADE)).response
    assert share is not None and share.message.endswith(
        "Invalid update version 1 for feature share.version. Broker 2 only supports versions 0-0")
    group = _decide(image, ("group.version", 1, UPGRADE)).response
    assert group is not None and group.message.endswith("Broker 2 does not support this feature.")
    assert _decide(image, ("metadata.version", 25, UPGRADE)).response is None


# ---- kafka-features on klog and on Kafka -----------------------------------------------------------------------

@pytest.fixture(scope="module", params=["klog", "kafka"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "klog":
        props = root / "server.properties"
        props.write_text(f"log.dirs={root / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:0\n")
        fmt = subprocess.run([*broker_command(), "format", "-t", CLUSTER_ID, "-c", str(props), *FORMAT_ARGS],
                             capture_output=True, text=True, timeout=60)
        assert fmt.returncode == 0, fmt.stderr
        with BrokerProcess(root / "data", properties_file=props) as node:
            yield request.param, node.bootstrap_servers
        return
    try:
        find_kafka_libs()
    except Exception as exc:  # the jars are fetched by tools/install-peers.sh
        pytest.skip(f"Apache Kafka jars not available: {exc}")
    with apache_kafka(root, free_port(), heap="512m", format_args=FORMAT_ARGS) as bootstrap:
        yield request.param, str(bootstrap)


def _features(bootstrap: str, *args: str) -> str:
    result = kt.run_kafka_tool(FEATURE_COMMAND, "--bootstrap-server", bootstrap, *args)
    return f"rc={result.returncode}\n{result.stdout.strip()}\n{result.stderr.strip()}".strip()


def _describe(bootstrap: str) -> dict[str, tuple[str, str, str]]:
    out = _features(bootstrap, "describe")
    rows = re.findall(r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                      r"FinalizedVersionLevel: (\S+)\s+Epoch: \d+", out)
    assert rows, out
    return {name: (lo, hi, level) for name, lo, hi, level in rows}


def _heartbeat_error(bootstrap: str, api_key: int) -> int:
    host, port = bootstrap.split(":")
    body = {"group_id": f"g{api_key}", "member_id": "m" * 22, "member_epoch": 0, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"], "topic_partitions": [],
            "server_assignor": None, "instance_id": None, "subscribed_topic_regex": None}
    with WireClient(host, int(port)) as wire:
        return int(wire.request(api_key, 1 if api_key == 76 else 0, body).error_code)


def test_describe_shows_the_formatted_levels_and_what_the_node_supports(server) -> None:
    kind, bootstrap = server
    described = _describe(bootstrap)
    finalized = {name: level for name, (_, _, level) in described.items()}
    assert finalized.pop("kraft.version") == ("0" if kind == "klog" else "1")   # klog: a single static voter
    assert finalized == {"metadata.version": "4.0-IV3", "group.version": "1", "transaction.version": "1",
                         "eligible.leader.replicas.version": "0", "share.version": "0", "streams.version": "0"}
    supported = {name: (lo, hi) for name, (lo, hi, _) in described.items()}
    assert supported["metadata.version"] == ("3.3-IV3", "4.3-IV0")
    for name in ("group.version", "share.version", "kraft.version", "eligible.leader.replicas.version",
                 "streams.version"):
        assert supported[name] == ("0", "1"), (name, supported)
    assert supported["transaction.version"] == ("0", "2")
    host, port = bootstrap.split(":")
    with WireClient(host, int(port)) as wire:
        v3 = wire.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        v4 = wire.request(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    # v3 readers cannot take a minimum of 0: only metadata.version is listed, as Kafka does
    assert [f.name for f in v3.supported_features] == ["metadata.version"]
    assert {f.name for f in v4.supported_features} == set(described)
    assert v4.finalized_features_epoch >= 0
    assert all(f.min_version_level == f.max_version_level >= 1 for f in v4.finalized_features)


@pytest.mark.long
def test_kafka_features_upgrades_and_downgrades_as_on_kafka(server) -> None:
    """The same tool runs, the same answers on both; share groups and the consumer protocol follow the features."""
    _, bootstrap = server
    assert _heartbeat_error(bootstrap, 76) == ErrorCode.UNSUPPORTED_VERSION   # share.version 0
    assert _features(bootstrap, "upgrade", "--feature", "share.version=1", "--dry-run") == \
        "rc=0\nshare.version can be upgraded to 1."
    assert _features(bootstrap, "upgrade", "--feature", "share.version=1") == "rc=0\nshare.version was upgraded to 1."
    assert _heartbeat_error(bootstrap, 76) != ErrorCode.UNSUPPORTED_VERSION
    assert _features(bootstrap, "downgrade", "--feature", "share.version=0") == \
        "rc=0\nshare.version was downgraded to 0."
    assert _heartbeat_error(bootstrap, 76) == ErrorCode.UNSUPPORTED_VERSION

    refused = _features(bootstrap, "upgrade", "--feature", "group.version=0")
    assert refused.startswith("rc=1") and "The upgradeType flag should be set to SAFE_DOWNGRADE or UNSAFE_DOWNGRADE" \
        in refused, refused
    assert _features(bootstrap, "downgrade", "--feature", "group.version=0", "--unsafe") == \
        "rc=0\ngroup.version was downgraded to 0."
    assert _heartbeat_error(bootstrap, 68) == ErrorCode.UNSUPPORTED_VERSION   # KIP-848 needs group.version 1
    assert _features(bootstrap, "upgrade", "--feature", "group.version=1") == "rc=0\ngroup.version was upgraded to 1."
    assert _heartbeat_error(bootstrap, 68) != ErrorCode.UNSUPPORTED_VERSION

    lossy = _features(bootstrap, "downgrade", "--feature", "metadata.version=21")
    assert lossy.startswith("rc=1") and "Unsupported metadata.version downgrade from 25 to 21. Refusing to perform " \
        "the requested downgrade because it might delete metadata information." in lossy, lossy
    assert _features(bootstrap, "downgrade", "--feature", "metadata.version=24") == \
        "rc=0\nmetadata.version was downgraded to 24."
    too_high = _features(bootstrap, "upgrade", "--feature", "metadata.version=99")
    assert too_high.startswith("rc=1") and "Invalid update version 99 for feature metadata.version. Local controller" \
        in too_high and "only supports versions 7-" in too_high, too_high
    assert _features(bootstrap, "upgrade", "--feature", "metadata.version=29", "--feature",
                     "eligible.leader.replicas.version=1") == \
        "rc=0\neligible.leader.replicas.version was upgraded to 1.\nmetadata.version was upgraded to 29."
    assert _describe(bootstrap)["metadata.version"][2] == "4.2-IV1"
    # 4.3-IV0: KIP-1066's cordoned log dirs
    assert _features(bootstrap, "upgrade", "--metadata", "4.3") == \
        "rc=0\n`metadata` flag is deprecated and may be removed in a future release.\nmetadata.version was upgraded to 30."
    assert _describe(bootstrap)["metadata.version"][2] == "4.3-IV0"


def test_update_features_v0_names_each_update_in_its_answer(server) -> None:
    _, bootstrap = server
    host, port = bootstrap.split(":")
    with WireClient(host, int(port)) as wire:
        ok = wire.request(57, 0, {"timeout_ms": 10000, "feature_updates": [
            {"feature": "eligible.leader.replicas.version", "max_version_level": 1, "allow_downgrade": False}]})
        bad = wire.request(57, 1, {"timeout_ms": 10000, "validate_only": True, "feature_updates": [
            {"feature": "nope.version", "max_version_level": 1, "upgrade_type": 1}]})
    assert (ok.error_code, ok.error_message) == (0, None)
    assert [(r.feature, r.error_code, r.error_message) for r in ok.results] == [
        ("eligible.leader.replicas.version", 0, "NONE")]
    assert bad.error_code == ErrorCode.INVALID_UPDATE_VERSION and list(bad.results) == []
    assert bad.error_message.endswith("Invalid update version 1 for feature nope.version. Local controller 1 does "
                                      "not support this feature.")


def test_format_refuses_levels_klog_does_not_implement(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    out = subprocess.run([*broker_command(), "format", "-t", CLUSTER_ID, "-c", str(props), "--feature",
                          "streams.version=2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Invalid update version 2 for feature streams.version. klog only supports " \
        "versions 0-1" in out.stderr, out.stderr
    assert not (tmp_path / "data" / "meta.properties").exists()
