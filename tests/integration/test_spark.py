"""The ``kafkapy`` Spark data source and the producer fleet, with a real local Spark session.

One ``local[2]`` SparkSession for the module (JVM start-up is ~10-25 s on the
2-core machine, far more than any test here) and one real kafkapy broker for
the module: ``broker`` is overridden here with module scope, built like the
conftest fixture (``support.broker.BrokerProcess``, same leak check), because
a broker start took 10-17 s per test on the loaded 2-core machine.  Every
test uses its own topics.  Records are produced and checked with
confluent-kafka, so the data source is checked against an independent client.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark not installed (pip install '.[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install '.[spark]')")
confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(300)


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_spark="spark-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The module's broker: PLAINTEXT (``bootstrap``), a SASL_SSL listener
    (``secure_bootstrap``, PLAIN user ``spark``, ``certs.ca_cert`` trusted) and
    an SSL listener requiring client certificates signed by the test CA
    (``mtls_bootstrap``) for the security tests; one broker, so no second
    start-up."""
    from support.certs import make_certs, named_listeners
    from support.clients import module_broker
    certs = make_certs(tmp_path_factory.mktemp("spark-certs"))
    port, ports, overrides = named_listeners(("SASL_SSL", "MTLS"), {"SASL_SSL": "SASL_SSL", "MTLS": "SSL"})
    overrides.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
                      "sasl.enabled.mechanisms": "PLAIN",
                      "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
                      "listener.name.mtls.ssl.truststore.type": "PEM",
                      "listener.name.mtls.ssl.truststore.location": certs.ca_cert,
                      "listener.name.mtls.ssl.client.auth": "required"})
    with module_broker(tmp_path_factory, overrides, name="spark-broker", port=port) as b:
        b.secure_bootstrap = f"127.0.0.1:{ports['SASL_SSL']}"
        b.mtls_bootstrap = f"127.0.0.1:{ports['MTLS']}"
        b.certs = certs
        yield b


@pytest.fixture(scope="module")
def spark():
    from kafkapy.spark import local_session
    # local[2,2]: a failed task is retried once (the transactional fleet's
    # retry test); local mode takes maxFailures from the master string only.
    session = local_session("kafkapy-tests", master="local[2,2]", shuffle_partitions=2)
    yield session
    session.stop()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)[topic].result(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(topic)


def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    """records: dicts with partition, key, value, headers, timestamp_ms (optional)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "log_level": 3})
    errors = []
    for r in records:
        kwargs = {"partition": r["partition"], "key": r.get("key"), "headers": r.get("headers"),
                  "on_delivery": lambda err, _m: err and errors.append(err)}
        if "timestamp_ms" in r:
            kwargs["timestamp"] = r["timestamp_ms"]
        producer.produce(topic, r["value"], **kwargs)
    assert producer.flush(30) == 0
    assert not errors, errors


def known_records(partitions: int, per_partition: int, tag: str = "") -> list[dict]:
    out = []
    for p in range(partitions):
        for i in range(per_partition):
            r = {"partition": p, "key": f"{tag}k{p}-{i}".encode(), "value": f"{tag}v{p}-{i}".encode() * 3,
                 "timestamp_ms": 1_700_000_000_000 + p * 1000 + i}
            if i % 3 == 0:
                r["headers"] = [("h1", b"a%d" % i), ("h2", b"")]
            if i == 1:
                r["key"] = None   # a null key survives the round trip
            out.append(r)
    return out


def rows_as_tuples(rows):
    return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in rows)


def reader(spark, bootstrap, topic, **options):
    df = spark.read.format("kafkapy").option("bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        df = df.option(k, v)
    return df.load()


def test_batch_read_schema_and_values(spark, broker):
    create_topic(broker.bootstrap, "events", 3)
    records = known_records(3, 20)
    produce(broker.bootstrap, "events", records)

    # Spark's Kafka source schema: the headers column only with includeHeaders.
    assert reader(spark, broker.bootstrap, "events").schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>")
    df = reader(spark, broker.bootstrap, "events", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert df.rdd.getNumPartitions() == 3   # one input partition per topic partition
    rows = df.collect()
    assert len(rows) == 60
    expected = {}
    for r in records:
        offset = sum(1 for e in expected if e[0] == r["partition"])
        expected[(r["partition"], offset)] = r
    for row in rows:
        r = expected[(row["partition"], row["offset"])]
        assert row["topic"] == "events"
        assert row["key"] == r["key"] and row["value"] == r["value"]
        assert row["timestampType"] == 0   # CreateTime
        assert int(row["timestamp"].timestamp() * 1000) == r["timestamp_ms"]
        if "headers" in r:
            assert [(h["key"], bytes(h["value"])) for h in row["headers"]] == r["headers"]
        else:
            assert row["headers"] is None


def test_batch_read_offset_ranges(spark, broker):
    create_topic(broker.bootstrap, "ranges", 2)
    produce(broker.bootstrap, "ranges", known_records(2, 10))

    df = reader(spark, broker.bootstrap, "ranges",
                startingOffsets=json.dumps({"ranges": {"0": 3, "1": -2}}),
                endingOffsets=json.dumps({"ranges": {"0": 7, "1": -1}}))
    got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]

    # A batch refuses a latest start and an earliest end, with Spark's words.
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries on Kafka"):
        reader(spark, broker.bootstrap, "ranges", startingOffsets="latest").count()
    with pytest.raises(Exception, match="ending offset for ranges-1 can't be earliest for batch queries"):
        reader(spark, broker.bootstrap, "ranges", endingOffsets=json.dumps({"ranges": {"0": 3, "1": -2}})).count()
    # minPartitions splits the ranges (Spark's KafkaOffsetRangeCalculator behaviour).
    split = reader(spark, broker.bootstrap, "ranges", minPartitions="6")
    assert split.rdd.getNumPartitions() >= 6
    assert sorted(r["offset"] for r in split.where("partition = 0").select("offset").collect()) == list(range(10))
    # subscribePattern picks topics by regex found anywhere in the name
    # (Spark's Admin path: findFirstIn), not only whole-name matches.
    assert (spark.read.format("kafkapy").option("bootstrap.servers", broker.bootstrap)
            .option("subscribePattern", "ange[s]").load().count()) == 20


def test_unknown_topic_is_a_clear_error(spark, broker):
    with pytest.raises(Exception, match="not available|UNKNOWN_TOPIC|Unknown topic"):
        reader(spark, broker.bootstrap, "no-such-topic").collect()


def test_write_then_read_back(spark, broker):
    from pyspark.sql import Row
    create_topic(broker.bootstrap, "sink", 3)
    rows = [Row(key=f"k{i}".encode(), value=f"value-{i}".encode(), partition=i % 3,
                headers=[Row(key="n", value=str(i).encode())]) for i in range(90)]
    df = spark.createDataFrame(rows, "key binary, value binary, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    df.write.format("kafkapy").option("bootstrap.servers", broker.bootstrap).option("topic", "sink") \
        .mode("append").save()

    back = reader(spark, broker.bootstrap, "sink", includeHeaders="true").collect()
    assert len(back) == 90
    for r in back:
        i = int(r["key"][1:])
        assert r["value"] == f"value-{i}".encode() and r["partition"] == i % 3
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]] == [("n", str(i).encode())]

    # the same check with an independent consumer: the writer really produced to Kafka
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t", "log_level": 3})
    try:
        lows_highs = [consumer.get_watermark_offsets(TopicPartition("sink", p), timeout=10) for p in range(3)]
    finally:
        consumer.close()
    assert [h for _l, h in lows_highs] == [30, 30, 30]

    # a string topic column and string key/value are accepted too (as Spark's Kafka sink does)
    create_topic(broker.bootstrap, "sink2", 1)
    spark.createDataFrame([("sink2", "a", "b")], "topic string, key string, value string") \
        .write.format("kafkapy").option("bootstrap.servers", broker.bootstrap).mode("append").save()
    (row,) = reader(spark, broker.bootstrap, "sink2").collect()
    assert (row["key"], row["value"]) == (b"a", b"b")


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{topic}-{isolation}", "log_level": 3,
                         "isolation.level": isolation, "enable.auto.commit": False})
    values = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        idle_until = time.monotonic() + 3
        for _ in range(5000):
            if time.monotonic() > idle_until:
                break
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                values.append(msg.value())
                idle_until = time.monotonic() + 1.5
    finally:
        consumer.close()
    return values


def test_exactly_once_write_survives_a_failed_job_and_its_rerun(spark, broker):
    """transactionalIdPrefix: each task writes in a transaction the driver commits
    when the job commits.  A job that fails midway (one task raises after the
    others wrote) leaves nothing visible to read_committed readers; its rerun
    with the same prefix fences the failed attempts' transactions and writes
    every row exactly once."""
    from pyspark.sql import Row
    topic = "eos-sink"
    create_topic(broker.bootstrap, topic, 3)
    rows = [Row(value=f"eos-{i}".encode(), partition=i % 3) for i in range(60)]
    base = spark.createDataFrame(rows, "value binary, partition int").repartition(3)

    def fail_on_last(row):
        if row["value"] == b"eos-59":
            raise RuntimeError("injected task failure")
        return row

    def write(df):
        df.write.format("kafkapy").option("bootstrap.servers", broker.bootstrap).option("topic", topic) \
            .option("transactionalIdPrefix", "eos-job").mode("append").save()

    failing = spark.createDataFrame(base.rdd.map(fail_on_last), base.schema)
    with pytest.raises(Exception, match="injected task failure"):
        write(failing)
    assert read_values(broker.bootstrap, topic, 3, "read_committed") == []
    write(base)
    committed = read_values(broker.bootstrap, topic, 3, "read_committed")
    assert sorted(committed) == sorted(f"eos-{i}".encode() for i in range(60))
    # What the failed job wrote is in the log, aborted (a task that wrote
    # nothing before the failure leaves nothing: at least the rerun's 60; 80
    # seen, the failed job's other tasks' 20 rows, aborted).
    assert len(read_values(broker.bootstrap, topic, 3, "read_uncommitted")) >= 60


def test_stream_two_micro_batches_and_restart_from_checkpoint(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream", 2)
    produce(broker.bootstrap, "stream", known_records(2, 5, tag="a"))
    checkpoint = str(tmp_path / "checkpoint")
    seen: list[tuple[int, list[bytes]]] = []

    def collect(batch_df, batch_id):
        seen.append((batch_id, [r["value"] for r in batch_df.select("value").collect()]))

    def start():
        stream = (spark.readStream.format("kafkapy").option("bootstrap.servers", broker.bootstrap)
                  .option("subscribe", "stream").option("startingOffsets", "earliest").load())
        return (stream.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
                .trigger(processingTime="0 seconds").start())

    def values(tag):
        return sorted(r["value"] for r in known_records(2, 5, tag=tag))

    query = start()
    try:
        query.processAllAvailable()
        produce(broker.bootstrap, "stream", known_records(2, 5, tag="b"))
        query.processAllAvailable()
    finally:
        query.stop()
    with_data = [(b, v) for b, v in seen if v]
    assert len(with_data) >= 2, seen
    assert sorted(v for _b, vs in seen for v in vs) == sorted(values("a") + values("b"))

    # Restart: records produced while the query was down are read once, and
    # nothing read before the stop is read again.
    seen.clear()
    produce(broker.bootstrap, "stream", known_records(2, 5, tag="c"))
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(v for _b, vs in seen for v in vs) == values("c")
    # the offsets Spark checkpointed are Kafka-style JSON, readable by people
    offsets_dir = Path(checkpoint) / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    assert json.loads(last.read_text().splitlines()[-1]) == {"stream": {"0": 15, "1": 15}}


def test_stream_max_offsets_per_trigger(spark, broker, tmp_path):
    if tuple(int(x) for x in __import__("pyspark").__version__.split(".")[:2]) < (4, 2):
        pytest.skip("read limits reach Python data sources from Spark 4.2")
    create_topic(broker.bootstrap, "limited", 1)
    produce(broker.bootstrap, "limited", known_records(1, 30))
    sizes: list[int] = []
    stream = (spark.readStream.format("kafkapy").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", "limited").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "10").load())
    query = (stream.writeStream.foreachBatch(lambda df, _id: sizes.append(df.count()))
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert [s for s in sizes if s] == [10, 10, 10]


BASE_MS = 1_700_000_000_000   # known_records' timestamps: BASE_MS + partition * 1000 + i


def test_batch_read_by_timestamp(spark, broker):
    """startingOffsetsByTimestamp / endingOffsetsByTimestamp / startingTimestamp,
    resolved by the broker's ListOffsets, with Spark's preference order and
    its startingOffsetsByTimestampStrategy."""
    create_topic(broker.bootstrap, "by-time", 2)
    produce(broker.bootstrap, "by-time", known_records(2, 10))

    def offsets(**options):
        df = reader(spark, broker.bootstrap, "by-time", **options).select("partition", "offset")
        return sorted((r["partition"], r["offset"]) for r in df.collect())

    got = offsets(startingOffsetsByTimestamp=json.dumps({"by-time": {"0": BASE_MS + 3, "1": BASE_MS + 1002}}),
                  endingOffsetsByTimestamp=json.dumps({"by-time": {"0": BASE_MS + 7, "1": BASE_MS + 9000}}))
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(2, 10)]
    # One timestamp for every partition, preferred over both other options.
    got = offsets(startingTimestamp=str(BASE_MS + 5), startingOffsets="earliest",
                  startingOffsetsByTimestamp=json.dumps({"by-time": {"0": 0, "1": 0}}))
    assert got == [(0, o) for o in range(5, 10)] + [(1, o) for o in range(10)]
    got = offsets(endingTimestamp=str(BASE_MS + 1004), endingOffsets="latest")
    assert got == [(0, o) for o in range(10)] + [(1, o) for o in range(4)]
    # No record that late in partition 0: Spark's error, or latest with the strategy.
    with pytest.raises(Exception, match=r"No offset matched from request of topic-partition by-time-0 and "
                                        rf"timestamp {BASE_MS + 500}\."):
        offsets(startingTimestamp=str(BASE_MS + 500))
    assert offsets(startingTimestamp=str(BASE_MS + 500), startingOffsetsByTimestampStrategy="latest") == \
        [(1, o) for o in range(10)]
    with pytest.raises(Exception, match="Expected a single long value, got soon"):
        offsets(startingTimestamp="soon")


def test_stream_starting_timestamp_and_min_offsets_per_trigger(spark, broker, tmp_path):
    """A stream starting by timestamp; minOffsetsPerTrigger holds micro-batches
    back until that many records wait or maxTriggerDelay has passed since the
    last batch (Spark's delayBatch; its first call always lets a batch through)."""
    if tuple(int(x) for x in __import__("pyspark").__version__.split(".")[:2]) < (4, 2):
        pytest.skip("read limits reach Python data sources from Spark 4.2")
    delay_s = 6
    create_topic(broker.bootstrap, "held", 1)
    produce(broker.bootstrap, "held", known_records(1, 8))   # timestamps BASE_MS + 0..7
    batches: list[tuple[float, list[int]]] = []

    def collect(df, _batch_id):
        offsets = sorted(r["offset"] for r in df.select("offset").collect())
        if offsets:
            batches.append((time.monotonic(), offsets))

    stream = (spark.readStream.format("kafkapy").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", "held").option("startingTimestamp", str(BASE_MS + 3))
              .option("minOffsetsPerTrigger", "10").option("maxTriggerDelay", f"{delay_s}s").load())
    # Spark's delay runs from when the last batch was planned, which this
    # test cannot see; it sees when a batch's rows reached foreachBatch, up to
    # seconds later on a loaded machine. So each check uses a bound on the
    # planning time: a batch is planned after the query started and after
    # the records it holds were produced.
    started = time.monotonic()
    query = (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        assert [b for _t, b in batches] == [list(range(3, 8))]   # the first batch is never held
        produce(broker.bootstrap, "held", [{"partition": 0, "value": b"x%d" % i} for i in range(4)])
        query.processAllAvailable()
        if time.monotonic() - started < delay_s:   # 4 < 10 records wait and the delay cannot have passed
            assert len(batches) == 1, batches
        y_produced = time.monotonic()
        produce(broker.bootstrap, "held", [{"partition": 0, "value": b"y%d" % i} for i in range(6)])
        query.processAllAvailable()
        assert sorted(o for _t, b in batches for o in b) == list(range(3, 18))
        # A batch below the minimum comes only once the delay has passed since
        # the batch before it, which holds offset 17 (planned after y_produced).
        produce(broker.bootstrap, "held", [{"partition": 0, "value": b"z"}])
        deadline = time.monotonic() + delay_s * 4
        while time.monotonic() < deadline and batches[-1][1][-1] != 18:
            time.sleep(0.2)
        assert batches[-1][1] == [18], batches
        assert batches[-1][0] - y_produced >= delay_s - 0.5, batches
    finally:
        query.stop()


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    (future,) = admin.delete_records([TopicPartition(topic, partition, before)]).values()
    assert future.result(timeout=30).low_watermark == before   # the new log start offset


def test_fail_on_data_loss_when_records_are_deleted(spark, broker, tmp_path):
    """Records deleted (DeleteRecords, as retention would) before a stream read
    them: failOnDataLoss=true fails the query with Spark's KAFKA_DATA_LOSS
    text; false warns and reads on from the new log start."""
    create_topic(broker.bootstrap, "lossy", 1)
    produce(broker.bootstrap, "lossy", known_records(1, 10))
    seen = {"true": [], "false": []}

    def start(fail):
        def collect(df, _batch_id):
            seen[fail].extend(r["offset"] for r in df.select("offset").collect())
        stream = (spark.readStream.format("kafkapy").option("bootstrap.servers", broker.bootstrap)
                  .option("subscribe", "lossy").option("startingOffsets", "earliest")
                  .option("failOnDataLoss", fail).load())
        return (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / fail))
                .start())

    for fail in seen:   # both read 0..9, then stop
        query = start(fail)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert seen[fail] == list(range(10))
    produce(broker.bootstrap, "lossy", known_records(1, 10, tag="b"))   # offsets 10..19
    _delete_records(broker.bootstrap, "lossy", 0, 15)                    # 10..14 never read

    query = start("true")
    try:
        with pytest.raises(Exception, match=r"KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE.*Could not read "
                                            r"records in offset \[10, 20\) for topic partition lossy-0"):
            query.processAllAvailable()
    finally:
        query.stop()
    assert seen["true"] == list(range(10))

    query = start("false")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert seen["false"] == list(range(10)) + list(range(15, 20))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_records_expiring_inside_a_running_range_read(broker, fail, caplog):
    """Records expire (DeleteRecords moves the log start to 50, as retention
    would) while an executor's read of [0, 100) is under way, past the
    records it has fetched: failOnDataLoss=true fails the read with Spark's
    COULD_NOT_READ_OFFSET_RANGE text naming the first offset it could not
    read; false logs Spark's warning and reads on from offset 50.  No Spark:
    the executor's read itself, held between two of its batches (librdkafka
    keeps at most a few one-record batches ahead: queued.min.messages=1)."""
    import logging

    from kafkapy.spark._kafka import KafkaSourceError, OffsetRange, read_range
    topic = f"expiring-{fail}"
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1,
                         "log_level": 3})
    for i in range(100):
        producer.produce(topic, b"v%d" % i, partition=0)
        producer.flush(10)   # one batch per record, so a fetch can stop between any two
    del producer   # librdkafka's handle goes now, not after the module's broker stopped
    options = {"bootstrap.servers": broker.bootstrap, "failondataloss": fail, "kafka.queued.min.messages": "1",
               "kafka.max.partition.fetch.bytes": "1"}
    read = read_range(options, OffsetRange(topic, 0, 0, 100), batch_rows=10)
    offsets = list(next(read)["offset"])
    assert offsets == list(range(len(offsets))) and 10 <= len(offsets) < 50   # a batch: ~10 rows
    _delete_records(broker.bootstrap, topic, 0, 50)
    if fail == "true":
        with pytest.raises(KafkaSourceError, match=r"KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE.*Could not "
                                                   r"read records in offset \[(\d+), (50|100)\) for topic "
                                                   rf"partition {topic}-0") as err:
            for cols in read:
                offsets.extend(cols["offset"])
        first_lost = int(err.value.args[0].split("offset [")[1].split(",")[0])
        # Every record handed out lies before the loss (the batch being filled fails with the task).
        assert offsets == list(range(len(offsets))) and len(offsets) <= first_lost
    else:
        with caplog.at_level(logging.WARNING, logger="kafkapy.spark"):
            for cols in read:
                offsets.extend(cols["offset"])
        first_lost = next(o for o in range(100) if o not in offsets)
        assert offsets == list(range(first_lost)) + list(range(50, 100))
        assert any("failOnDataLoss" in r.getMessage() and f"{topic}-0" in r.getMessage() for r in caplog.records)
    # Expired inside the range: records fetched before it were read, the rest below 50 lost.
    assert 10 <= first_lost < 50, first_lost


def _streams(spark, broker, tmp_path):
    """``start(name, fail, **source)`` runs a stream of the kafkapy source with
    failOnDataLoss ``fail`` into ``seen[name]`` ((topic, offset) per row);
    ``fails_within_60_s(query)`` drives a query until it fails (bounded: it
    fails at the first batch planned after a deleted topic's metadata is
    gone, which may linger a moment)."""
    seen: dict[str, list] = {}

    def start(name, fail, **source):
        seen[name] = []

        def collect(df, _batch_id):
            seen[name].extend((r["topic"], r["offset"]) for r in df.select("topic", "offset").collect())
        stream = (spark.readStream.format("kafkapy").option("bootstrap.servers", broker.bootstrap)
                  .options(**source).option("startingOffsets", "earliest")
                  .option("failOnDataLoss", fail).load())
        return (stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / name))
                .start())

    def fails_within_60_s(query):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            query.processAllAvailable()
            time.sleep(0.5)

    return seen, start, fails_within_60_s


def _delete_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for future in admin.delete_topics(names, operation_timeout=30).values():
        future.result(timeout=60)


def test_fail_on_data_loss_when_a_pattern_topic_is_deleted(spark, broker, tmp_path):
    """A ``subscribePattern`` topic deleted under a running query drops out of
    the pattern's topics (Spark's Admin path, its default since 3.4):
    failOnDataLoss=true fails the query with Spark's "are gone" text; false
    warns and goes on with the topics left, and a topic created later is
    read from its earliest offset."""
    for name in ("gone-a", "gone-b", "kept-a", "kept-b"):
        create_topic(broker.bootstrap, name, 1)
        produce(broker.bootstrap, name, known_records(1, 3, tag=name))
    seen, start, fails_within_60_s = _streams(spark, broker, tmp_path)
    strict = start("true", "true", subscribePattern="gone-.")
    lenient = start("false", "false", subscribePattern="kept-")   # found anywhere in the name
    try:
        strict.processAllAvailable()
        lenient.processAllAvailable()
        _delete_topics(broker.bootstrap, ["gone-a", "kept-a"])
        produce(broker.bootstrap, "gone-b", known_records(1, 2, tag="late"))
        produce(broker.bootstrap, "kept-b", known_records(1, 2, tag="late"))
        with pytest.raises(Exception, match=r"Set\(gone-a-0\) are gone\. Some data may have been missed\."
                                            r".*failOnDataLoss"):
            fails_within_60_s(strict)
        lenient.processAllAvailable()
        create_topic(broker.bootstrap, "kept-c", 1)
        produce(broker.bootstrap, "kept-c", known_records(1, 2, tag="new"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and ("kept-c", 1) not in seen["false"]:
            lenient.processAllAvailable()
            time.sleep(0.5)
        assert lenient.isActive and lenient.exception() is None
    finally:
        strict.stop()
        lenient.stop()
    assert sorted(seen["false"]) == sorted([("kept-a", o) for o in range(3)] + [("kept-b", o) for o in range(5)]
                                           + [("kept-c", o) for o in range(2)])


def test_a_subscribed_topic_deleted_under_a_query_fails_it_whatever_fail_on_data_loss(spark, broker, tmp_path):
    """A ``subscribe``d topic deleted under a running query cannot be
    described any more: Spark's Admin-based source fails the query with
    Kafka's UnknownTopicOrPartitionException after its offset-fetch retries,
    even with failOnDataLoss=false (the option covers offsets, not a topic
    that is gone)."""
    create_topic(broker.bootstrap, "listed-a", 1)
    produce(broker.bootstrap, "listed-a", known_records(1, 3, tag="listed"))
    seen, start, fails_within_60_s = _streams(spark, broker, tmp_path)
    listed = start("listed", "false", subscribe="listed-a", **{"fetchOffset.retryIntervalMs": "200"})
    try:
        listed.processAllAvailable()
        _delete_topics(broker.bootstrap, ["listed-a"])
        with pytest.raises(Exception, match=r"UnknownTopicOrPartitionException: This server does not host "
                                            r"this topic-partition"):
            fails_within_60_s(listed)
    finally:
        listed.stop()
    assert sorted(seen["listed"]) == [("listed-a", o) for o in range(3)]


def _load_fleet():
    spec = importlib.util.spec_from_file_location("spark_fleet", REPO / "perf" / "spark_fleet.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["spark_fleet"] = module   # run_fleet ships its task functions by value
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("client", ["confluent", "kafkapy"])
def test_small_fleet_with_verification(spark, broker, client, tmp_path):
    fleet = _load_fleet()
    if client == "kafkapy" and importlib.util.find_spec("kafkapy.client") is None:
        pytest.skip("kafkapy.client not available")
    topic = f"fleet-{client}"
    create_topic(broker.bootstrap, topic, 2)
    result = fleet.run_fleet(spark, broker.bootstrap, topic, tasks=2, records=2000, record_size=64,
                             client=client, acks="all", idempotent=True, linger_ms=1)
    agg = result["aggregate"]
    assert agg["tasks"] == 2 and agg["records_acked"] == 4000 and agg["errors"] == 0
    assert agg["value_bytes"] == 4000 * 64
    assert result["latency_ms"]["samples"] >= 2 * 1000
    assert 0 < result["latency_ms"]["p50"] <= result["latency_ms"]["p99"] <= result["latency_ms"]["max"]
    verification = fleet.verify(spark, broker.bootstrap, topic, result["run_id"], 2, 2000, exactly_once=True)
    assert verification["ok"], verification
    assert verification["lost"] == 0 and verification["duplicates"] == 0

    # Verification notices loss: claim a third task that never ran.
    missing = fleet.verify(spark, broker.bootstrap, topic, result["run_id"], 3, 2000, exactly_once=True)
    assert not missing["ok"] and missing["lost"] == 2000

    # Outputs: json, markdown and a plot.
    results = {"started": "test", "master": "local[2]", "tasks": 2, "records": 2000, "record_size": 64,
               "acks": "all", "idempotent": True, "client": client,
               "brokers": {"kafkapy": {"fleet": result, "verify": verification}}}
    out = tmp_path / "fleet.json"
    fleet.write_outputs(results, out)
    assert json.loads(out.read_text())["brokers"]["kafkapy"]["verify"]["ok"]
    assert "exactly-once: ok" in out.with_suffix(".md").read_text()
    if importlib.util.find_spec("matplotlib") is not None:
        assert out.with_suffix(".png").stat().st_size > 1000


def test_transactional_fleet_exactly_once_across_task_retries(spark, broker):
    """perf/spark_fleet.py --transactional --fail-after: every task's first
    attempt fails with a transaction open (flushed); Spark retries it, the
    retry fences it, resumes from the committed progress, and the
    read_committed output holds every seq exactly once."""
    if importlib.util.find_spec("kafkapy.client") is None:
        pytest.skip("kafkapy.client not available")
    fleet = _load_fleet()
    topic = "fleet-txn"
    create_topic(broker.bootstrap, topic, 2)
    result = fleet.run_fleet(spark, broker.bootstrap, topic, tasks=2, records=1000, record_size=32,
                             client="kafkapy", linger_ms=1, transactional=True, txn_records=100, fail_after=250)
    # Attempt 0 committed seqs 0-199 and failed in the transaction of 200-299.
    assert sorted(result["notes"]) == [f"task {t}: attempt 1 resumed at seq 200" for t in range(2)]
    assert [t["records_sent"] for t in result["tasks"]] == [800, 800]
    committed = fleet.verify(spark, broker.bootstrap, topic, result["run_id"], 2, 1000, True, "read_committed")
    assert committed["ok"] and committed["lost"] == 0 and committed["duplicates"] == 0, committed
    everything = fleet.verify(spark, broker.bootstrap, topic, result["run_id"], 2, 1000, False)
    # The aborted transactions' 50 records per task are in the log, read_uncommitted.
    assert everything["duplicates"] == 100 and everything["lost"] == 0, everything


def test_streaming_sink_read_transform_write_exactly_once(spark, broker, tmp_path):
    """writeStream.format("kafkapy"): a read -> transform -> write query over
    three micro-batches; the read_committed output is the input transformed,
    each row once.  Then the state a driver dying after the sink's commit but
    before Spark's commit log entry leaves (the last commits/N file deleted):
    the restart runs batch N again, its tasks find their markers at N and
    write nothing."""
    from support.spark_pipeline import start_pipeline, transformed
    create_topic(broker.bootstrap, "pipe-in", 2)
    create_topic(broker.bootstrap, "pipe-out", 2)
    records = known_records(2, 30, tag="p")
    produce(broker.bootstrap, "pipe-in", records)
    expected = sorted(transformed(r["value"]) for r in records)
    checkpoint = tmp_path / "cp"
    for run in range(2):
        if run == 1:
            last = _batches(checkpoint, "commits")[-1]
            for name in (str(last), f".{last}.crc"):   # Hadoop's checksum file goes with it
                (checkpoint / "commits" / name).unlink(missing_ok=True)
        query = start_pipeline(spark, broker.bootstrap, "pipe-in", "pipe-out", str(checkpoint))
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert sorted(read_values(broker.bootstrap, "pipe-out", 2, "read_committed")) == expected
        assert len(_batches(checkpoint, "commits")) >= 3   # maxOffsetsPerTrigger 20 over 60 records
    # Nothing was aborted or written twice: every record in the log is committed.
    assert len(read_values(broker.bootstrap, "pipe-out", 2, "read_uncommitted")) == 60


def test_streaming_sink_exactly_once_over_sasl_ssl(spark, broker, tmp_path):
    """The exactly-once pipeline with source and sink on the SASL_SSL listener:
    the same ``kafka.*`` security options (librdkafka's names) reach librdkafka
    for the reads and kafkapy's client for the transactions, the markers'
    admin look-ups and the driver's EndTxn."""
    from support.spark_pipeline import start_pipeline, transformed
    create_topic(broker.bootstrap, "tls-in", 2)
    create_topic(broker.bootstrap, "tls-out", 2)
    records = known_records(2, 15, tag="s")
    produce(broker.bootstrap, "tls-in", records)
    security = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.username": "spark", "kafka.sasl.password": "spark-secret",
                "kafka.ssl.ca.location": str(broker.certs.ca_cert)}
    query = start_pipeline(spark, broker.secure_bootstrap, "tls-in", "tls-out", str(tmp_path / "cp"),
                           options=security)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(read_values(broker.bootstrap, "tls-out", 2, "read_committed")) == \
        sorted(transformed(r["value"]) for r in records)
    assert len(read_values(broker.bootstrap, "tls-out", 2, "read_uncommitted")) == 30

    # A wrong password: the exactly-once writer's task fails with the
    # broker's authentication error (bounded; nothing is written).
    from pyspark.sql import Row
    df = spark.createDataFrame([Row(value=b"never")], "value binary")
    started = time.monotonic()
    with pytest.raises(Exception, match="(?i)authentication"):
        (df.write.format("kafkapy").option("bootstrap.servers", broker.secure_bootstrap).option("topic", "tls-out")
         .options(**{**security, "kafka.sasl.password": "wrong", "kafka.max.block.ms": "10000"})
         .option("transactionalIdPrefix", "tls-wrong").mode("append").save())
    assert time.monotonic() - started < 120
    assert len(read_values(broker.bootstrap, "tls-out", 2, "read_uncommitted")) == 30


def test_streaming_sink_exactly_once_over_mutual_tls_with_java_stores(spark, broker, tmp_path):
    """The exactly-once pipeline against a listener that requires client
    certificates (``ssl.client.auth=required``), configured as a Spark user
    configures Spark's Kafka connector: Java's names, the stores PKCS12 files
    written by keytool with their passwords.  The same options reach
    librdkafka (reads) and kafkapy's client (transactions, markers, the
    driver's EndTxn); the output is read back through Spark over the same
    listener with Java's PEM store names.  A writer without a client
    certificate is refused by the broker (nothing written)."""
    from pyspark.sql import Row

    from support.spark_pipeline import start_pipeline, transformed
    create_topic(broker.bootstrap, "mtls-in", 2)
    create_topic(broker.bootstrap, "mtls-out", 2)
    records = known_records(2, 15, tag="m")
    produce(broker.bootstrap, "mtls-in", records)
    stores = broker.certs.java_stores("spark-writer", "/CN=spark-writer")
    java = {"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PKCS12",
            "kafka.ssl.keystore.location": str(stores.keystore_p12), "kafka.ssl.keystore.password": stores.password,
            "kafka.ssl.key.password": stores.password, "kafka.ssl.truststore.type": "PKCS12",
            "kafka.ssl.truststore.location": str(stores.truststore_p12),
            "kafka.ssl.truststore.password": stores.password}
    query = start_pipeline(spark, broker.mtls_bootstrap, "mtls-in", "mtls-out", str(tmp_path / "cp"), options=java)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    cert, key = broker.certs.client("spark-writer", "/CN=spark-writer")
    (tmp_path / "writer.pem").write_text(key.read_text() + cert.read_text())
    pem = {"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PEM",
           "kafka.ssl.keystore.location": str(tmp_path / "writer.pem"), "kafka.ssl.truststore.type": "PEM",
           "kafka.ssl.truststore.location": str(broker.certs.ca_cert), "kafka.isolation.level": "read_committed"}
    rows = reader(spark, broker.mtls_bootstrap, "mtls-out", **pem).select("value").collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(transformed(r["value"]) for r in records)
    assert len(read_values(broker.bootstrap, "mtls-out", 2, "read_uncommitted")) == 30

    no_certificate = {k: v for k, v in java.items() if "keystore" not in k and "key.password" not in k}
    df = spark.createDataFrame([Row(value=b"never")], "value binary")
    started = time.monotonic()
    with pytest.raises(Exception, match="(?i)ssl|tls|handshake|certificate|connect"):
        (df.write.format("kafkapy").option("bootstrap.servers", broker.mtls_bootstrap).option("topic", "mtls-out")
         .options(**no_certificate, **{"kafka.max.block.ms": "10000"})
         .option("transactionalIdPrefix", "mtls-refused").mode("append").save())
    assert time.monotonic() - started < 120
    assert len(read_values(broker.bootstrap, "mtls-out", 2, "read_uncommitted")) == 30


def _batches(checkpoint: Path, log: str) -> list[int]:
    directory = checkpoint / log
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def _pipeline_killed_and_restarted(bootstrap: str, make_topic, tmp_path: Path, after_first_commit=None,
                                   row_delay_s: float = 0.1, kill_after_s: float | None = None) -> None:
    """The pipeline in a child process (its own Spark driver) is SIGKILLed (its
    process group, so the JVM and Python workers too) while a micro-batch's
    rows are in the log uncommitted, then run again from the checkpoint: the
    read_committed output holds every input row transformed exactly once.
    ``after_first_commit()`` runs once the first micro-batch is committed
    (the cluster variant kills a broker there); ``row_delay_s`` per row makes
    a micro-batch of 10 rows per task last 10x as long; ``kill_after_s``:
    kill a micro-batch that long in flight even if its rows were not seen in
    the log (watermarks answer late while a leader moves)."""
    import os
    import signal
    import subprocess

    from support.spark_pipeline import transformed
    make_topic("kill-in", 2)
    make_topic("kill-out", 2)
    records = known_records(2, 60, tag="k")
    produce(bootstrap, "kill-in", records)
    checkpoint = tmp_path / "cp"
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}")

    def run(row_delay_s: float) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "support.spark_pipeline", "--bootstrap", bootstrap,
             "--source", "kill-in", "--sink", "kill-out", "--checkpoint", str(checkpoint),
             "--max-offsets-per-trigger", "20", "--row-delay-s", str(row_delay_s)],
            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "child.log", "ab"),
            start_new_session=True)

    def open_transaction_has_rows() -> bool:
        """Some partition's high watermark is past its last stable offset."""
        try:
            return any(stable < high for stable, high in zip(*(
                [c.get_watermark_offsets(TopicPartition("kill-out", p), timeout=2, cached=False)[1]
                 for p in range(2)] for c in consumers)))
        except confluent_kafka.KafkaException:
            return False   # a leader is moving (the cluster variant's killed broker): ask again

    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": "kill-watch", "log_level": 3,
                           "isolation.level": level}) for level in ("read_committed", "read_uncommitted")]
    child = run(row_delay_s)
    try:
        deadline = time.monotonic() + 150
        rows_seen = False
        in_flight = None   # (batch, since): planned in offsets/, not yet in commits/
        while time.monotonic() < deadline and child.poll() is None:
            offsets, commits = _batches(checkpoint, "offsets"), _batches(checkpoint, "commits")
            if commits and after_first_commit is not None:
                after_first_commit()
                after_first_commit = None
            if commits and offsets and offsets[-1] > commits[-1]:
                if in_flight is None or in_flight[0] != offsets[-1]:
                    in_flight = (offsets[-1], time.monotonic())
                rows_seen = open_transaction_has_rows()
                if rows_seen or (kill_after_s is not None and time.monotonic() - in_flight[1] > kill_after_s):
                    break
            time.sleep(0.05)
        else:
            pytest.fail(f"no batch in flight within 150 s (exit {child.poll()}): "
                        f"{(tmp_path / 'child.log').read_text()[-3000:]}")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)   # the child's own session: only what this test started
        child.wait(30)
        for consumer in consumers:
            consumer.close()
    killed_in = _batches(checkpoint, "offsets")[-1]
    assert killed_in not in _batches(checkpoint, "commits")

    child = run(0.0)
    try:
        assert child.wait(240) == 0, (tmp_path / "child.log").read_text()[-3000:]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert _batches(checkpoint, "commits")[-1] >= killed_in
    committed = read_values(bootstrap, "kill-out", 2, "read_committed")
    assert sorted(committed) == sorted(transformed(r["value"]) for r in records)
    if rows_seen:   # the killed batch's rows were being written: the log holds them, aborted
        assert len(read_values(bootstrap, "kill-out", 2, "read_uncommitted")) > len(records)


@pytest.mark.long   # two Spark drivers start in child processes: 2-3 min on the 2-core machine
def test_streaming_sink_exactly_once_after_driver_sigkill(broker, tmp_path):
    _pipeline_killed_and_restarted(broker.bootstrap, lambda name, n: create_topic(broker.bootstrap, name, n),
                                   tmp_path)   # killed only once the batch's rows are seen in the log


@pytest.mark.long
def test_streaming_sink_exactly_once_after_driver_and_broker_sigkill_in_a_cluster(make_cluster, tmp_path):
    """The same against three brokers (replication factor 3, acks=all by the
    transactional producer), with broker 3 SIGKILLed once the first
    micro-batch is committed and left dead for the rest of the test.
    Micro-batches last ~4 s here, so the driver kill still finds one in
    flight after the leaders have moved."""
    cluster, _zk = make_cluster(**{"transaction.state.log.replication.factor": 3,
                                   "transaction.state.log.min.isr": 2})
    bootstrap = cluster.bootstrap
    _pipeline_killed_and_restarted(bootstrap, lambda name, n: cluster.create_topic(name, n, 3), tmp_path,
                                   after_first_commit=cluster.brokers[3].kill, row_delay_s=0.4, kill_after_s=2.0)


@pytest.mark.long   # spark-submit starts its own JVM: 1-3 min on the 2-core machine
def test_readme_example_pipeline_with_spark_submit(broker, tmp_path):
    """examples/uppercase_pipeline.py as the README runs it (spark-submit,
    local[2], loopback only), with --idle-exit so it ends by itself: every
    input line upper-cased once in the read_committed output, one progress
    line per micro-batch that read something, 'stopped' at the end."""
    import os
    import shutil
    import subprocess

    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    if spark_submit is None:
        pytest.skip("spark-submit is not beside this Python")
    create_topic(broker.bootstrap, "ex-events", 3)
    create_topic(broker.bootstrap, "ex-upper", 3)
    produce(broker.bootstrap, "ex-events", [{"partition": i % 3, "value": b"event %d" % i} for i in range(60)])
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    done = subprocess.run(
        [spark_submit, "--master", "local[2]", "--conf", "spark.driver.host=127.0.0.1",
         "--conf", "spark.ui.enabled=false", str(REPO / "examples" / "uppercase_pipeline.py"),
         "--bootstrap", broker.bootstrap, "--source", "ex-events", "--sink", "ex-upper",
         "--checkpoint", str(tmp_path / "cp"), "--idle-exit", "15"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "stopped" and lines[0].startswith("micro-batch 0: 60 records ex-events -> ex-upper"), lines
    assert sorted(read_values(broker.bootstrap, "ex-upper", 3, "read_committed")) == \
        sorted(b"EVENT %d" % i for i in range(60))
