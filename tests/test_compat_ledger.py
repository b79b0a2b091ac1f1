"""docs/compatibility.md cannot drift from the code: its table of advertised versions must equal what a running
klog-broker answers in ApiVersions, and every version it says a client used must lie inside the range."""

from __future__ import annotations

import pathlib
import re

import pytest

from klog.protocol import ApiKey
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(60)

LEDGER = pathlib.Path(__file__).resolve().parent.parent / "docs" / "compatibility.md"
_ROW = re.compile(r"^\|\s*([A-Za-z]+)\s*\|\s*(\d+)\s*\|\s*(\d+)-(\d+)\s*\|(.*)\|\s*$")


def ledger_rows():
    rows = {}
    header = None
    for line in LEDGER.read_text(encoding="utf-8").splitlines():
        if line.startswith("| API |"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            continue
        match = _ROW.match(line)
        if match and header:
            name, key, lo, hi, rest = match.groups()
            cells = [cell.strip() for cell in rest.split("|")]
            clients = {}
            for column, cell in zip(header[3:], cells):
                clients[column] = [] if cell == "-" else [int(v) for v in cell.split(",")]
            rows[int(key)] = (name, (int(lo), int(hi)), clients)
    return rows


@pytest.fixture(scope="module")
def advertised(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("ledger")) as broker:
        with WireClient(broker.host, broker.port) as wire:
            response = wire.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "ledger",
                                                             "client_software_version": "1"})
    return {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}


def test_ledger_lists_exactly_the_advertised_apis_and_ranges(advertised):
    rows = ledger_rows()
    assert rows, f"no table rows parsed from {LEDGER}"
    documented = {key: versions for key, (_, versions, _) in rows.items()}
    assert documented == advertised


def test_ledger_names_match_the_api_keys():
    for key, (name, _, _) in ledger_rows().items():
        assert ApiKey(key).name.replace("_", "").lower() == name.lower()


def test_versions_clients_used_lie_inside_the_advertised_ranges():
    for key, (name, (lo, hi), clients) in ledger_rows().items():
        for client, versions in clients.items():
            assert all(lo <= v <= hi for v in versions), (name, client, versions, (lo, hi))


def test_old_librdkafka_probe_versions_are_advertised(advertised):
    # librdkafka < 2.11.1 enables features from these single versions (see the ledger's notes)
    for key, version in ((18, 0), (0, 0), (0, 3), (0, 7), (1, 4), (1, 10), (10, 0), (22, 0), (2, 1)):
        lo, hi = advertised[key]
        assert lo <= version <= hi, (key, version)
