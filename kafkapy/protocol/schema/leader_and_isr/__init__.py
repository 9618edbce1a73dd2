"""leader_and_isr (written for kafkapy; see the version modules)."""
