"""controlled_shutdown (written for kafkapy; see the version modules)."""
