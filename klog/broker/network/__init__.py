"""The broker's network front: listeners, connections, framing, request memory, responses."""
