"""Kafka's security model shared by the controller and the broker: principals, and (as they land) SASL
mechanisms, SCRAM credentials and the ACL authorizer over the metadata image.

This floor sits above ``klog.metadata`` (ACLs and credentials are metadata records) and below ``klog.client`` (the
client's SASL mechanisms reuse the same SCRAM code) and the controller and broker.
"""
