"""Coordinators: the group coordinator and the transaction coordinator.

The group coordinator is split where Kafka splits it: ``group_coordinator``
(GroupCoordinator: the membership protocol, with KIP-848's half in
``consumer_coordinator``) and ``group_metadata_manager``
(GroupMetadataManager: the group cache, ``__consumer_offsets`` through
``offsets_topic`` and ``records``, offsets, loading). Their API handlers are
in ``handlers``; the transaction coordinator is ``transaction``. Sans-IO:
``kafkapy.server.coordinator_process`` runs them.
"""
