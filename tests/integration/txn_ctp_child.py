"""A consume-transform-produce process for test_transactions (killed and
restarted by the test): reads ``<in>``'s partitions, assigned (no group
membership, so a restart does not wait for a rebalance), from group
``<group>``'s committed offsets (read_committed),
writes each value uppercased to ``<out>`` on the same partition and commits
the input offsets in the same transaction (transactional.id ``<txn_id>``),
10 records a transaction, until the group's committed offsets reach
``<total>`` records; prints COMMITTED <n> after each commit.

Usage: python txn_ctp_child.py BOOTSTRAP IN OUT GROUP TXN_ID TOTAL PARTITIONS
"""

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main() -> int:
    bootstrap, topic_in, topic_out, group, txn_id, total, partitions = sys.argv[1:8]
    total = int(total)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2})
    # Fences the previous instance first (its open transaction is aborted),
    # so the committed offsets read next are stable.
    producer.init_transactions(30)
    consumer.assign([TopicPartition(topic_in, p) for p in range(int(partitions))])
    done = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(10, 0.5) if m.error() is None]
        if not msgs:
            committed = consumer.committed(consumer.assignment(), 10) if consumer.assignment() else []
            if sum(max(tp.offset, 0) for tp in committed) >= total:
                return 0
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(topic_out, value=m.value().upper(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done += len(msgs)
        print(f"COMMITTED {done}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
