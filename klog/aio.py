"""asyncio twins of klog's clients: ``klog.aio.Producer``, ``klog.aio.Consumer`` and ``klog.aio.AdminClient``.

They take the same arguments and configuration as the blocking ``klog.Producer``/``Consumer``/``AdminClient``,
run on the caller's event loop, and are started with ``await x.start()`` or ``async with``.
"""

from klog.client.admin import AsyncAdminClient as AdminClient
from klog.client.consumer_api import AsyncConsumer as Consumer
from klog.client.producer_api import AsyncProducer as Producer
from klog.client.share_consumer import AsyncShareConsumer as ShareConsumer

__all__ = ["Producer", "Consumer", "ShareConsumer", "AdminClient"]
