"""The broker's network front, one module per concern; :class:`~.connection.Connection` composes them.

- ``listener``: the listening sockets and the accepted connections (``max.connections``,
  ``max.connections.per.ip``, the descriptor budget, ``connections.max.idle.ms``, socket buffer sizes)
- ``frame_reader``: requests cut from a connection's bytes (``socket.request.max.bytes``), read ahead within
  ``klog.connection.max.inflight.requests`` / ``klog.connection.max.buffered.bytes``
- ``request_memory``: request bytes admitted before their buffers are allocated (per connection and
  ``queued.max.request.bytes``)
- ``pipeline``: the in-order response pipeline (``klog.produce.pipeline.depth``)
- ``writer``: responses onto the socket: coalescing, the native writer thread, sendfile (zero copy), the write
  timeout
- ``limits``: every bound above, named after its config key
- ``connection``: the asyncio protocol and request dispatch
"""
