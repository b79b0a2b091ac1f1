"""Consumer-group coordinator (issue 5). The broker-facing contract lives in ``api.py``.

The broker imports ``GroupCoordinator`` from this package when it exists; until then it answers the group
APIs with a placeholder (see ``klog.broker.handlers.groups``).
"""
