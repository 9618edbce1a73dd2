"""The metadata stores' ZooKeeper side, in Apache Kafka 3.9's znode layout:
the client and the broker's registration (``client``), the znode codecs
(``data``), the cluster-mode store's admin writes (``store``) and the
controller's reads, fenced writes and watches (``controller``)."""
