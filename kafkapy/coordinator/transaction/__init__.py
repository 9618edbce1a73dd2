"""The transaction coordinator's package (Kafka's ``kafka.coordinator.transaction``).

Today it holds the producer-id manager that InitProducerId uses; the
transaction coordinator (issue 11) goes beside it, above replication as the
group coordinator is.
"""
