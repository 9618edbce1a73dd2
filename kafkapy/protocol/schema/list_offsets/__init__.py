"""list_offsets: the Kafka 3.9 version kio lacks (v0, old_style_offsets; written for kafkapy, see the version module)."""
