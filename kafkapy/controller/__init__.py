"""The cluster controller (Kafka's KafkaController, ZooKeeper mode), sans-IO.

``kafkapy.controller.state.ControllerState`` holds what the elected
controller knows (live brokers, replica assignments, partition states with
their znode versions, topic ids, deletions in progress) and turns events
(failover, new partitions, brokers failing or starting, ISR changes leaders
wrote, lost znode versions, topic deletions and their StopReplica answers,
controlled shutdowns, preferred and unclean elections, the auto leader
rebalance;
AlterPartition too, though leaders write their ISR changes to ZooKeeper
themselves here, Kafka's pre-AlterPartition path) into effects:
partition-state znode writes fenced by their version, LeaderAndIsr /
UpdateMetadata / StopReplica requests to brokers, topic znode removal. The
controller child process (``kafkapy.server.controller_process``; see
docs/architecture.md, "Cluster mode") does the I/O: it writes the znodes
through ``kafkapy.metadata.zk.controller`` and sends the requests through
``kafkapy.server.controller_channel``.

It sits beside the group coordinator, above replication and metadata.
"""
