"""The embedded "consumer" protocol of classic groups (Subscription and Assignment blobs).

Its one implementation is :mod:`klog.protocol.consumer_protocol`, shared with the broker's group coordinator;
the client's modules import it from here.
"""

from klog.protocol.consumer_protocol import *  # noqa: F403 - the client's name for the shared codec
from klog.protocol.consumer_protocol import __all__  # noqa: F401
