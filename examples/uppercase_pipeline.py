"""A streaming read -> transform -> write job for ``spark-submit``: topic ``events``
upper-cased into ``events-upper``, exactly once, with the ``kafkapy`` data source.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        examples/uppercase_pipeline.py --bootstrap 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094

It prints one line per micro-batch that read something and runs until
stopped (Ctrl-C or SIGTERM: the query stops between micro-batches), or with
``--idle-exit S`` until nothing new arrived for S seconds.  Restarted with the
same ``--checkpoint`` it goes on where the checkpoint ends; read the output
with ``isolation.level=read_committed`` (kafkapy-console-consumer
``--isolation-level read_committed``) to see each record once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094")
    parser.add_argument("--source", default="events")
    parser.add_argument("--sink", default="events-upper")
    parser.add_argument("--checkpoint", default="/tmp/uppercase-checkpoint")
    parser.add_argument("--max-offsets-per-trigger", default="10000")
    parser.add_argument("--idle-exit", type=float, default=0, help="stop after this many idle seconds (0: never)")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession, functions as F
    from kafkapy.spark import register

    spark = (SparkSession.builder.appName("uppercase")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)                                   # format "kafkapy"
    events = (spark.readStream.format("kafkapy")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.source)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
              .load())
    shouted = events.select("key", F.upper(F.col("value").cast("string")).alias("value"))
    query = (shouted.writeStream.format("kafkapy")    # exactly once by default
             .option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.sink)
             .option("checkpointLocation", args.checkpoint)
             .start())

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    # Idle time counts from the query's first progress report: Spark's start
    # (JVM, Python workers, the first plan) took over a minute on a loaded
    # 2-core machine and is not idleness.
    seen_batch, last_data = -1, None
    try:
        while query.isActive and not stopping:
            query.awaitTermination(1)
            progress = query.lastProgress
            if progress and last_data is None:
                last_data = time.monotonic()
            if progress and progress["batchId"] != seen_batch:
                seen_batch = progress["batchId"]
                if progress["numInputRows"]:
                    last_data = time.monotonic()
                    print(f"micro-batch {seen_batch}: {progress['numInputRows']} records "
                          f"{args.source} -> {args.sink}, source offsets now {progress['sources'][0]['endOffset']}",
                          flush=True)
            if args.idle_exit and last_data is not None and time.monotonic() - last_data > args.idle_exit:
                break
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        spark.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
