"""update_metadata (written for kafkapy; see the version modules)."""
