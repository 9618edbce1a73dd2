"""The transaction coordinator's package (Kafka's ``kafka.coordinator.transaction``).

* ``producer_id_manager`` — producer ids for InitProducerId (blocks from the metadata store).
* ``__transaction_state``'s record formats and the id -> partition hash are
  ``kafkapy.protocol.transaction_log`` (the tools read them too).
* ``metadata`` — one transactional id's state and transitions (Kafka's TransactionMetadata).
* ``coordinator`` — the coordinator's decisions, sans-IO (TransactionCoordinatorState).
* ``transaction_coordinator`` — its I/O half over a store and a marker channel.
* ``state_store``, ``marker_channel``, ``handlers`` — the topic store, marker writing, the API handlers.
* ``pending_offsets`` — offsets committed inside transactions, kept by the group coordinator.

Above replication, as the group coordinator is; runs in the group-coordinator
process (docs/architecture.md, "Transactions").
"""
