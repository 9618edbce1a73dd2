"""The cluster controller (Kafka's KafkaController, ZooKeeper mode), sans-IO.

``kafkapy.controller.state.ControllerState`` holds what the elected
controller knows (live brokers, replica assignments, partition states with
their znode versions) and turns events (new partitions, brokers failing or
starting, AlterPartition from leaders) into effects: partition-state znode
writes fenced by their version, and LeaderAndIsr / UpdateMetadata requests to
brokers. The controller child process (see docs/architecture.md, "Cluster
mode") does the I/O: it writes the znodes through
``kafkapy.coordination.zookeeper`` and sends the requests.

It sits beside the group coordinator, above replication and coordination.
"""
