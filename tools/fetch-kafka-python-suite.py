"""Fetch kafka-python's source distribution (the version pinned here, sha256-checked) from PyPI and unpack it under
.cache/kafka-python, ready for its own integration tests (``test/integration``) to run against an external broker;
print the unpacked directory. Idempotent: tools/install-peers.sh runs it, tests/test_kafka_python_suite.py again.

    python3 tools/fetch-kafka-python-suite.py

The sdist lacks two files of its repository's ``test`` directory; both are written here: ``test/__init__.py``
(empty, so that ``test`` is the suite's package rather than Python's own) and ``test/service.py``, whose
``ExternalService`` is all an external broker needs (an address). Standard library only: it runs before any
virtualenv exists.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "3.0.12"
SDIST_URL = ("https://files.pythonhosted.org/packages/bb/a9/"
             f"e8b96f7f71aacd94faf1db0feb9750bf557b17bd22b0595023c88c1f0eb2/kafka_python-{VERSION}.tar.gz")
SDIST_SHA256 = "4ccda3616b9aa5c353d74a97f2770d6cd1b950890d77ab0e8890e09a48eeed65"
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "kafka-python"
DOWNLOAD_TIMEOUT_S = 120
SERVICE_PY = '''"""Written by klog's tools/fetch-kafka-python-suite.py: every broker of this run is external."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def dump_logs(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("no Kafka distribution to spawn here: every broker is external")
'''


def unpacked_suite() -> Path:
    root = CACHE / f"kafka_python-{VERSION}"
    if not (root / "test" / "integration" / "conftest.py").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(SDIST_URL, timeout=DOWNLOAD_TIMEOUT_S) as response:
            sdist = response.read()
        digest = hashlib.sha256(sdist).hexdigest()
        if digest != SDIST_SHA256:
            sys.exit(f"kafka-python {VERSION} sdist from {SDIST_URL}: sha256 {digest}, expected {SDIST_SHA256}")
        with tempfile.TemporaryDirectory(dir=CACHE) as unpacking:
            archive = Path(unpacking) / "sdist.tar.gz"
            archive.write_bytes(sdist)
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "data_filter"):   # Python 3.12, and 3.8 to 3.11 since their 2023 updates
                    tar.extractall(unpacking, filter="data")
                else:
                    tar.extractall(unpacking)
            shutil.rmtree(root, ignore_errors=True)
            (Path(unpacking) / root.name).rename(root)
    (root / "test" / "__init__.py").write_text("")
    (root / "test" / "service.py").write_text(SERVICE_PY)
    return root


if __name__ == "__main__":
    print(unpacked_suite())
