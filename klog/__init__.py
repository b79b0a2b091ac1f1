"""klog: a Kafka-compatible distributed commit log with a Rust core.

The broker speaks the Apache Kafka wire protocol and stores data in Kafka's on-disk format.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("klog")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

from klog.embedded import Broker  # noqa: E402  (the in-process broker)

__all__ = ["__version__", "Broker", "Producer", "Consumer", "AdminClient"]

_CLIENT_EXPORTS = ("Producer", "Consumer", "AdminClient")


def __getattr__(name: str) -> object:
    # The client (klog.client) is imported on first use so that `import klog` stays light for the broker.
    if name in _CLIENT_EXPORTS:
        import klog.client

        return getattr(klog.client, name)
    raise AttributeError(f"module 'klog' has no attribute {name!r}")
