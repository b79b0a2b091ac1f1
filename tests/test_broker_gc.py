"""A started broker freezes what start-up made out of the cyclic GC's generations (``gc.freeze``), so a full
collection while it serves scans only objects made since: measured during the e2e workload, a full collection
took 13-17 ms over ~36,000 objects before and 0.3-0.5 ms after (docs/performance.md, "Start-up objects
frozen out of the cyclic GC")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from klog.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(60)


def test_a_started_broker_has_frozen_its_start_up_objects_out_of_the_cyclic_gc(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"node.id": 1}) as node:
        frozen = [int(m.group(1)) for line in node.lines if (m := re.search(r"cyclic GC: (\d+) start-up objects "
                                                                              r"frozen", line))]
        assert len(frozen) == 1, node.lines[-20:]
        # modules, the protocol codec and the metadata image: tens of thousands of objects
        assert frozen[0] > 10_000, frozen
        started = next(i for i, line in enumerate(node.lines) if "klog-broker started in" in line)
        assert any("start-up objects frozen" in line for line in node.lines[:started]), "frozen after serving began"
