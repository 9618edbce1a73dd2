"""A read -> transform -> write streaming query from one kafkapy topic to another.

Used by tests/integration/test_spark.py in-process, and as its own process
(``python -m support.spark_pipeline ...``) for the driver-kill test: the
process runs the query until everything available is written, then exits 0.
The transform is ``value -> b"OUT-" + value.upper()``, key kept;
``row_delay_s`` slows it per row so a test can kill the driver mid-batch.
"""

from __future__ import annotations

import argparse


def transformed(value: bytes) -> bytes:
    return b"OUT-" + bytes(value).upper()


def start_pipeline(spark, bootstrap: str, source: str, sink: str, checkpoint: str,
                   max_offsets_per_trigger: int = 20, row_delay_s: float = 0.0, options: dict | None = None):
    """``options`` (e.g. ``kafka.*`` security settings) go to the source and the sink alike."""
    from pyspark.sql import functions as F

    def transform(value):
        # Nested, so cloudpickle ships it by value (executors need not import support/).
        import time
        time.sleep(row_delay_s)
        return b"OUT-" + bytes(value).upper()

    stream = (spark.readStream.format("kafkapy").option("bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger)).options(**(options or {})).load())
    out = stream.select("key", F.udf(transform, "binary")("value").alias("value"))
    return (out.writeStream.format("kafkapy").option("bootstrap.servers", bootstrap).option("topic", sink)
            .options(**(options or {})).option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds").start())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=20)
    parser.add_argument("--row-delay-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    from kafkapy.spark import local_session
    spark = local_session("kafkapy-pipeline", master="local[2]", shuffle_partitions=2)
    try:
        query = start_pipeline(spark, args.bootstrap, args.source, args.sink, args.checkpoint,
                               args.max_offsets_per_trigger, args.row_delay_s)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
