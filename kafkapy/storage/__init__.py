"""One partition's log on local disk: segments, indexes, checkpoints, recovery, retention.

Modules: ``config`` (LogConfig), ``index`` (OffsetIndex, TimeIndex),
``segment`` (LogSegment), ``local_log`` (LocalLog: the segments of one
directory), ``log`` (Log, Kafka's UnifiedLog: offsets, appends, producer
state, transactions, leader epochs, retention), ``log_loader`` (LogLoader:
opening a partition directory, recovery, the cleaner's interrupted swaps),
``leader_epoch_cache`` (LeaderEpochFileCache, the
``leader-epoch-checkpoint``), ``cleaner`` (log compaction), ``checkpoints``
(Kafka's text files), ``log_manager`` (LogManager), ``errors``; ``shared``
(PartitionState) and ``producer_state`` (ProducerStateManager).  Nothing is
imported here so that importing one module never drags in the others.
"""
