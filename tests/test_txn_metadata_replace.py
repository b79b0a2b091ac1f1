"""``TxnMetadata.replace``: the copy every transaction state transition makes (the coordinator's hot path, in place of
``dataclasses.replace``) gives what ``dataclasses.replace`` gives, and refuses a field the state does not have."""

from __future__ import annotations

import dataclasses

import pytest

from klog.broker.transactions.records import TxnMetadata, TxnState


def _meta() -> TxnMetadata:
    return TxnMetadata("tid", 1000, 7, 60000, TxnState.ONGOING, {("t", 0), ("t", 1)}, 5, 6, last_producer_epoch=6,
                       previous_producer_id=999, next_producer_id=-1, client_transaction_version=2, pending=True)


def test_replace_equals_dataclasses_replace_and_leaves_the_original_alone() -> None:
    meta = _meta()
    changes = {"state": TxnState.PREPARE_COMMIT, "last_update_ms": 9, "producer_epoch": 8, "pending": False}
    copy = meta.replace(**changes)
    assert copy == dataclasses.replace(meta, **changes)
    assert copy is not meta and type(copy) is TxnMetadata
    assert (meta.state, meta.producer_epoch, meta.pending) == (TxnState.ONGOING, 7, True)
    copy.producer_id = 1
    assert meta.producer_id == 1000


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="no field"):
        _meta().replace(epoch=3)
