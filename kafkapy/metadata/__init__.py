"""Cluster metadata: the model every store hands out (``model``), the store
interface (``store``) and its stores: the embedded file store of a standalone
broker (``embedded``), a cluster broker's image of what the controller sent
(``image``) and ZooKeeper (``zk``: client, znode formats, the admin store and
the controller's ZooKeeper side); ACL storage (``acl_store``) and Kafka's
replica placement and leader election rules (``assignment``). The only kazoo
importers are ``zk`` and ``acl_store``."""
