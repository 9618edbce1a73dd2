"""Replication: each partition as this broker sees it (``Partition``), the
replica manager every handler goes through for appends and reads, and the
purgatory of delayed operations (Kafka's DelayedProduce / DelayedFetch).

Only this layer writes a partition's high watermark; storage reports log end
offsets. It sits above ``kafkapy.metadata`` and ``kafkapy.storage`` and
below the coordinator and the server (see docs/architecture.md, Layers).
"""
