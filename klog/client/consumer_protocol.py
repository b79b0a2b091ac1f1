"""The embedded "consumer" protocol of classic groups (Subscription and Assignment blobs).

Its one implementation is :mod:`klog.protocol.consumer_protocol`, shared with the broker's group coordinator;
the client's modules import it from here.
"""

from klog.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

__all__ = ["Subscription", "Assignment", "encode_subscription", "decode_subscription", "encode_assignment",
           "decode_assignment"]
