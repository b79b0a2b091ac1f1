"""klog: a Kafka-compatible distributed commit log with a Rust core.

The broker speaks the Apache Kafka wire protocol and stores data in Kafka's on-disk format.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("klog")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = ["__version__", "Broker", "Producer", "Consumer", "ShareConsumer", "AdminClient"]

_CLIENT_EXPORTS = ("Producer", "Consumer", "ShareConsumer", "AdminClient")


def __getattr__(name: str) -> object:
    # The client (klog.client) and the in-process broker (klog.embedded) are imported on first use: `import klog`
    # runs before any of klog's modules, so importing them here would make every floor (the protocol codec, the
    # client) load the broker, and make this package's own module the highest floor.
    if name in _CLIENT_EXPORTS:
        import klog.client

        return getattr(klog.client, name)
    if name == "Broker":
        import klog.embedded

        return klog.embedded.Broker
    raise AttributeError(f"module 'klog' has no attribute {name!r}")
