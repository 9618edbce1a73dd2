"""describe_log_dirs: the Kafka 3.9 versions kio lacks (written for kafkapy; see the version modules)."""
