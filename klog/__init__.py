"""klog: a Kafka-compatible distributed commit log with a Rust core.

The broker speaks the Apache Kafka wire protocol and stores data in Kafka's on-disk format.
"""

__all__ = ["__version__", "Broker", "Producer", "Consumer", "ShareConsumer", "AdminClient"]

#: The installed distribution's version, looked up on first use (:func:`__getattr__`).
__version__: str

_CLIENT_EXPORTS = ("Producer", "Consumer", "ShareConsumer", "AdminClient")


def _version() -> str:
    # importlib.metadata (with email, zipfile, csv...) is loaded only when the version is asked for: every process
    # that imports any of klog's modules imports this package first.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("klog")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0"


def __getattr__(name: str) -> object:
    # The client (klog.client) and the in-process broker (klog.embedded) are imported on first use: `import klog`
    # runs before any of klog's modules, so importing them here would make every floor (the protocol codec, the
    # client) load the broker, and make this package's own module the highest floor.
    if name == "__version__":
        global __version__
        __version__ = _version()
        return __version__
    if name in _CLIENT_EXPORTS:
        import klog.client

        return getattr(klog.client, name)
    if name == "Broker":
        import klog.embedded

        return klog.embedded.Broker
    raise AttributeError(f"module 'klog' has no attribute {name!r}")
