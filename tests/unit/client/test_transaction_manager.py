"""The transactional producer's state rules (Java's TransactionManager), no broker:
what each call allows in each state, and the fatal / abortable split of errors."""

import pytest

from kafkapy.client import KafkaProducer, errors
from kafkapy.client import transaction_manager as tm

# Nothing listens here: none of these calls may need the network.
NOWHERE = "127.0.0.1:9"


def manager():
    return tm.TransactionManager("t", 60000, client=None, max_block_ms=1000, retry_backoff_ms=10)


def test_calls_before_init_and_outside_a_transaction():
    m = manager()
    with pytest.raises(errors.IllegalStateError, match="before completing a call to initTransactions"):
        m.check_send()
    with pytest.raises(errors.IllegalStateError, match="beginTransaction in state UNINITIALIZED"):
        m.begin_transaction()
    m.state = tm.READY
    with pytest.raises(errors.IllegalStateError, match="Cannot call send in state READY"):
        m.check_send()
    with pytest.raises(errors.IllegalStateError, match="commitTransaction in state READY"):
        m.commit_transaction(lambda timeout: None)
    m.begin_transaction()
    m.check_send()
    with pytest.raises(errors.IllegalStateError, match="initTransactions in state IN_TRANSACTION"):
        m.init_transactions()


def test_failed_send_is_abortable_fencing_is_fatal():
    m = manager()
    m.state = tm.READY
    m.begin_transaction()
    m.on_batch_failed(errors.for_code(7))  # REQUEST_TIMED_OUT: abortable
    assert m.state == tm.ABORTABLE_ERROR
    with pytest.raises(errors.IllegalStateError, match="previous transactional or idempotent request"):
        m.check_send()
    with pytest.raises(errors.IllegalStateError, match="commitTransaction in state ABORTABLE_ERROR"):
        m.commit_transaction(lambda timeout: None)
    m.on_batch_failed(errors.for_code(90))  # PRODUCER_FENCED: fatal, and it stays so
    assert m.state == tm.FATAL_ERROR
    m.on_batch_failed(errors.for_code(7))
    assert m.state == tm.FATAL_ERROR
    with pytest.raises(errors.IllegalStateError, match="fatal error state"):
        m.abort_transaction(lambda e: None, lambda t: None)


def test_producer_settings_and_non_transactional_calls():
    with pytest.raises(ValueError, match="without also enabling idempotence"):
        KafkaProducer(bootstrap_servers=NOWHERE, transactional_id="t", enable_idempotence=False)
    plain = KafkaProducer(bootstrap_servers=NOWHERE)
    try:
        with pytest.raises(errors.IllegalStateError, match="non-transactional producer"):
            plain.begin_transaction()
    finally:
        plain.close(0)
    p = KafkaProducer(bootstrap_servers=NOWHERE, transactional_id="t")
    try:
        assert p._fast is None  # every send goes through the transaction's state check
        with pytest.raises(errors.IllegalStateError, match="initTransactions"):
            p.send("topic", b"v")
        assert p.metrics()["transaction-state"] == tm.UNINITIALIZED
    finally:
        p.close(0)
