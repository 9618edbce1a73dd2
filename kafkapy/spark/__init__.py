"""PySpark integration: the ``kafkapy`` data source and helpers for Spark sessions.

``register(spark)`` makes ``spark.read.format("kafkapy")`` and friends
available (see ``kafkapy.spark.datasource``); ``local_session()`` builds a
``local[*]`` session that only talks on 127.0.0.1 (tests, benchmarks).
Needs ``pip install 'kafkapy[spark]'`` (pyspark >= 4, pyarrow) and Java 17.
"""

from __future__ import annotations

import os

__all__ = ["register", "local_session", "KafkapyDataSource"]


def register(spark) -> None:
    """Register format ``"kafkapy"`` with a session (idempotent)."""
    from .datasource import KafkapyDataSource
    spark.dataSource.register(KafkapyDataSource)


def local_session(app_name: str = "kafkapy", master: str = "local[*]", shuffle_partitions: int = 4,
                  driver_memory: str = "1g", extra_conf: dict | None = None):
    """A SparkSession bound to 127.0.0.1 with the UI off, with format ``kafkapy`` registered.

    Loopback only: SPARK_LOCAL_IP and the driver host/bind address keep the
    JVM from resolving (and listening on) the machine's external address.
    The machine this was written on has 2 cores shared with other work, so
    shuffles get few partitions (Spark's default 200 would be 200 tiny tasks)
    and the driver a 1 GiB heap.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", _python())
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.default.parallelism", str(max(2, os.cpu_count() or 2)))
               .config("spark.driver.memory", driver_memory)
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def _python() -> str:
    import sys
    return sys.executable


def __getattr__(name):
    if name == "KafkapyDataSource":
        from .datasource import KafkapyDataSource
        return KafkapyDataSource
    raise AttributeError(name)
