"""stop_replica (written for kafkapy; see the version modules)."""
