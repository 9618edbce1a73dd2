"""Cluster metadata stores: the embedded file store (standalone); ZooKeeper comes with cluster mode."""
