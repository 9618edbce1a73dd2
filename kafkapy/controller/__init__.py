"""The cluster controller (Kafka's KafkaController, ZooKeeper mode).

* ``state.ControllerState`` (sans-IO) holds what the elected controller
  knows (live brokers, replica assignments, partition states with their
  znode versions, topic ids, deletions in progress) and turns events
  (failover, new partitions, brokers failing or starting, ISR changes
  leaders wrote, lost znode versions, topic deletions and their StopReplica
  answers, controlled shutdowns, preferred and unclean elections, the auto
  leader rebalance; AlterPartition too, though leaders write their ISR
  changes to ZooKeeper themselves here, Kafka's pre-AlterPartition path)
  into effects: partition-state znode writes fenced by their version,
  LeaderAndIsr / UpdateMetadata / StopReplica requests to brokers, topic
  znode removal. ``reassignment`` does the same for partition
  reassignments. The effects are plain data in ``effects``.
* ``kafka_controller.Controller`` is one elected term: the event thread,
  which reads ZooKeeper, runs the state's decisions and carries out their
  effects, writing znodes through ``kafkapy.metadata.zk.controller``.
* ``channel_manager.ControllerChannelManager`` sends the requests, one
  queue and thread per broker (Kafka's ControllerChannelManager).

The broker's controller child (``kafkapy.server.controller_process``; see
docs/architecture.md, "Cluster mode") holds the ZooKeeper session, runs the
election and starts a ``Controller`` when elected.

It sits beside the group coordinator, above replication and metadata.
"""
