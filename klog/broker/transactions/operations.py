"""What a partition leader's Produce and TxnOffsetCommit paths ask of the transaction protocol, without loading the
transaction coordinator (a broker whose clients use no transactions never imports it)."""

from __future__ import annotations

#: Kafka's AddPartitionsToTxnManager.TransactionSupportedOperation of a Produce / TxnOffsetCommit version: before
#: GENERIC_ERROR_SUPPORTED TRANSACTION_ABORTABLE reads INVALID_TXN_STATE; from ADD_PARTITION (transaction protocol
#: v2) the leader adds the partition to the transaction instead of only verifying it.
DEFAULT_ERROR, GENERIC_ERROR_SUPPORTED, ADD_PARTITION = 0, 1, 2

#: the transaction coordinator's APIs: api key -> (min, max) version implemented
SUPPORTED_APIS: dict[int, tuple[int, int]] = {
    22: (0, 5),   # InitProducerId (transactional ids; idempotent producers are answered by the handler)
    24: (0, 5),   # AddPartitionsToTxn (v4+: batched, from brokers: verify-only (KIP-890 part 1) or add (v2))
    25: (0, 4),   # AddOffsetsToTxn
    26: (0, 5),   # EndTxn (v5: transaction protocol v2, the epoch bumps, the answer carries it)
}


def produce_operation(version: int) -> int:
    """Kafka's ``produceRequestVersionToTransactionSupportedOperation``."""
    return ADD_PARTITION if version > 11 else GENERIC_ERROR_SUPPORTED if version > 10 else DEFAULT_ERROR


def txn_offset_commit_operation(version: int) -> int:
    """Kafka's ``txnOffsetCommitRequestVersionToTransactionSupportedOperation``."""
    return ADD_PARTITION if version > 4 else GENERIC_ERROR_SUPPORTED if version > 3 else DEFAULT_ERROR
