"""Type stubs for klog._native._core. Each concern keeps its own section."""

__version__: str

class CorruptRecordError(ValueError): ...

# --- records (codec) ---------------------------------------------------------------------
def crc32c(data: bytes | bytearray | memoryview) -> int: ...

# --- storage -------------------------------------------------------------------------------
