"""fetch: the Kafka 3.9 versions kio lacks (v0-v3, message formats v0/v1; written for kafkapy, see the version modules)."""
