"""franz-go's own consume-transform-produce tests (TestTxnEtl and TestGroupETL, from the test binary of its kgo
package, built from the Go module proxy at the version tests/go/go.mod pins: ``go test -c
github.com/twmb/franz-go/pkg/kgo``) against one klog broker and one Apache Kafka 4.3 broker started from the same
properties.

TestTxnEtl: a transactional producer writes 100,000 records; three levels of transactional consumer groups copy them
on, level to level (classic range and cooperative-sticky groups, KIP-848 groups, static members), while consumers
join, leave after a transaction or two and rebalance; every level must commit each record exactly once (read_committed
fetches, TxnOffsetCommit with the member's generation, KIP-447's RequireStable offset fetch). TestGroupETL is the same
chain with plain groups and commits. Both checks are franz-go's, unchanged. tools/install-peers.sh downloads the
module (tests/go)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from klog.testing.kafka import one_broker

pytestmark = pytest.mark.timeout(900)

HERE = Path(__file__).resolve().parent
#: franz-go's tests create their topics and groups themselves; one replica on one broker
CONFIG = {"offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3}
#: records the producer writes (franz-go's KGO_TEST_RECORDS; its own default is 500,000)
RECORDS = 100_000
#: the tests' bound: klog runs both in about a minute, Kafka in about two
RUN_S = 480


@pytest.fixture(scope="module")
def kgo_tests(tmp_path_factory) -> Path:
    if shutil.which("go") is None:
        pytest.fail("go not found: franz-go's tests need the Go toolchain")
    out = tmp_path_factory.mktemp("franz-go") / "kgo.test"
    subprocess.run(["go", "test", "-c", "-o", str(out), "github.com/twmb/franz-go/pkg/kgo"], cwd=HERE / "go",
                   check=True, timeout=900)
    return out


@pytest.fixture(scope="module", params=["klog", "kafka"])
def bootstrap(request, tmp_path_factory) -> Iterator[str]:
    with one_broker(request.param, tmp_path_factory.mktemp(f"franz-go-{request.param}"), CONFIG) as servers:
        yield servers


def test_franz_gos_transactional_and_plain_etl_chains_read_every_record_exactly_once(kgo_tests: Path,
                                                                                     bootstrap: str) -> None:
    env = {**os.environ, "KGO_SEEDS": bootstrap, "KGO_TEST_RF": "1", "KGO_TEST_RECORDS": str(RECORDS)}
    run = subprocess.run([str(kgo_tests), "-test.run", "^(TestTxnEtl|TestGroupETL)$", "-test.v",
                          "-test.timeout", f"{RUN_S}s"], env=env, capture_output=True, text=True,
                         timeout=RUN_S + 60)
    out = run.stdout + run.stderr
    passed = [line.strip() for line in out.splitlines() if line.startswith("--- PASS")]
    assert run.returncode == 0, f"franz-go's tests failed (exit {run.returncode}):\n{out[-6000:]}"
    assert sorted(p.split()[2] for p in passed) == ["TestGroupETL", "TestTxnEtl"], out[-3000:]
