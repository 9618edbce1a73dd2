"""Producer ids for InitProducerId (Kafka's ``ProducerIdManager``, ZooKeeper mode).

Ids are handed out from blocks reserved in the metadata store
(``MetadataStore.new_producer_id_block``: ZooKeeper's
``/latest_producer_id_block`` in cluster mode, the embedded file standalone),
so a block is written once per 1,000 ids and no id is ever issued twice, even
across restarts (what was left of a block when the broker stopped is
skipped). Every process of the broker shares the current block through two
counters of the shared partition table, changed under the table lock: the
next id and the end of the block.
"""

from __future__ import annotations

NEXT_PRODUCER_ID = "next_producer_id"
PRODUCER_ID_BLOCK_END = "producer_id_block_end"


class ProducerIdManager:
    def __init__(self, broker_id: int, store, table):
        self.broker_id = broker_id
        self.store = store
        self.table = table

    def generate_producer_id(self) -> int:
        table = self.table
        with table.lock_all():
            producer_id = table.counter(NEXT_PRODUCER_ID)
            if producer_id >= table.counter(PRODUCER_ID_BLOCK_END):
                block = self.store.new_producer_id_block(self.broker_id)
                producer_id = max(producer_id, block.first_producer_id)
                table.set_counter(PRODUCER_ID_BLOCK_END, block.last_producer_id + 1)
            table.set_counter(NEXT_PRODUCER_ID, producer_id + 1)
        return producer_id
