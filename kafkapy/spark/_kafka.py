"""Kafka client work behind the Spark data source: planning and range reads.

Nothing here imports pyspark, so the executor-side functions can be tested and
reused (the producer fleet) without a Spark session.  The wire work is done by
confluent-kafka (librdkafka): kafkapy's own client (``kafkapy.client``) has no
consumer yet, and a data source must be able to read from any Kafka broker.

Offsets travel between driver and executors, and into Spark's streaming
checkpoint, in the JSON shape Spark's Kafka source uses:
``{"topic": {"0": 23, "1": 0}}`` (partition numbers as strings, because JSON
object keys are strings).  Inside this module offsets are
``dict[(topic, partition)] -> offset``.

Ownership: every function creates, uses and closes its own librdkafka handle;
nothing is shared between calls or threads.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Iterator, Mapping

# Spark's Kafka source sentinels inside startingOffsets/endingOffsets JSON
# (Kafka's ListOffsets timestamps): -2 earliest, -1 latest.
EARLIEST = -2
LATEST = -1

# Kafka's TimestampType ids, as Spark's Kafka source reports them in the
# timestampType column (librdkafka numbers them 0 none, 1 create, 2 log append).
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
_TIMESTAMP_TYPE_FROM_LIBRDKAFKA = {0: NO_TIMESTAMP_TYPE, 1: CREATE_TIME, 2: LOG_APPEND_TIME}

# Rows per Arrow batch handed to Spark: 8192 x 1 KiB values = 8 MiB per batch,
# large enough that per-batch costs (Arrow IPC framing, JVM copy) vanish and
# small enough that an executor's Python worker never holds much.
DEFAULT_BATCH_ROWS = 8192
# Bound on a range read that stops making progress: Spark's Kafka source
# calls this kafkaConsumer.pollTimeoutMs and defaults it to 120 s
# (spark.network.timeout); 30 s is plenty on loopback and keeps a wedged test
# from hanging for minutes.
DEFAULT_POLL_TIMEOUT_MS = 30_000
# librdkafka's default fetch.queue.backoff.ms pauses fetching for 1 s whenever
# its pre-fetch queue is full; perf/bench_broker.py measured that this capped a
# Python consumer at ~190 k records/s, so range reads use 10 ms.
_FETCH_QUEUE_BACKOFF_MS = 10


class KafkaSourceError(RuntimeError):
    """A misconfigured source, an unknown topic, or lost data."""


# --------------------------------------------------------------------- options

def normalize_options(options: Mapping[str, str]) -> dict[str, str]:
    """A plain dict with lower-cased keys.

    Spark hands a data source a case-insensitive mapping (option names are
    case-insensitive, as for Spark's Kafka source); it is copied to a plain
    dict to be pickled to executors, so every lookup here uses lower case.
    """
    return {str(k).lower(): str(v) for k, v in options.items()}


def bootstrap_servers(options: Mapping[str, str]) -> str:
    """``bootstrap.servers`` (brief's name) or ``kafka.bootstrap.servers`` (Spark's)."""
    for key in ("bootstrap.servers", "kafka.bootstrap.servers"):
        if options.get(key):
            return options[key]
    raise KafkaSourceError("option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required")


def client_config(options: Mapping[str, str]) -> dict[str, object]:
    """librdkafka settings: every ``kafka.<name>`` option, prefix stripped, as Spark does."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap_servers(options), "log_level": 3}
    for key, value in options.items():
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers":
            config[key[len("kafka."):]] = value
    return config


def consumer_config(options: Mapping[str, str]) -> dict[str, object]:
    config = {
        # librdkafka insists on a group.id even for assign(); nothing is ever
        # committed and no group is joined.
        "group.id": "kafkapy-spark-source",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": _FETCH_QUEUE_BACKOFF_MS,
    }
    config.update(client_config(options))
    return config


def parse_offsets_option(text: str | None, default: str) -> str | dict[tuple[str, int], int]:
    """``earliest`` / ``latest`` or Spark's JSON ``{"t": {"0": 5, "1": -2}}``."""
    text = (text or default).strip()
    if text in ("earliest", "latest"):
        return text
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise KafkaSourceError(f"offsets must be 'earliest', 'latest' or JSON, not {text!r}") from exc
    if not isinstance(raw, dict):
        raise KafkaSourceError(f"offsets JSON must be an object of topics, not {text!r}")
    out: dict[tuple[str, int], int] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise KafkaSourceError(f"offsets JSON for topic {topic!r} must be an object")
        for partition, offset in parts.items():
            out[(topic, int(partition))] = int(offset)
    return out


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(raw: Mapping[str, Mapping[str, int]] | None) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(o) for topic, parts in (raw or {}).items() for p, o in parts.items()}


# -------------------------------------------------------------------- planning

@dataclass(frozen=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one topic partition: one Spark input partition."""
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


class Planner:
    """Driver-side metadata and ListOffsets through one librdkafka consumer handle.

    Owned by one DataSourceReader / DataSourceStreamReader on the driver; call
    close() when done (it is also closed on garbage collection by librdkafka).
    """

    def __init__(self, options: Mapping[str, str], timeout_s: float = 10.0):
        from confluent_kafka import Consumer
        self.options = normalize_options(options)
        self.timeout_s = timeout_s
        self._consumer = Consumer(consumer_config(options))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def topics(self) -> list[str]:
        subscribe = self.options.get("subscribe")
        pattern = self.options.get("subscribepattern")
        assign = self.options.get("assign")
        given = [k for k, v in (("subscribe", subscribe), ("subscribepattern", pattern),
                                ("assign", assign)) if v]
        if len(given) != 1:
            raise KafkaSourceError("exactly one of 'subscribe', 'subscribePattern', 'assign' is required"
                                   f" (got {given or 'none'})")
        if subscribe:
            return [t.strip() for t in subscribe.split(",") if t.strip()]
        if assign:
            return sorted(json.loads(assign))
        regex = re.compile(pattern)
        metadata = self._consumer.list_topics(timeout=self.timeout_s)
        return sorted(t for t in metadata.topics if regex.fullmatch(t) and not t.startswith("__"))

    def partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) the options select, sorted."""
        if self.options.get("assign"):
            raw = json.loads(self.options["assign"])
            return sorted((t, int(p)) for t, ps in raw.items() for p in ps)
        out = []
        for topic in self.topics():
            metadata = self._consumer.list_topics(topic, timeout=self.timeout_s)
            info = metadata.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise KafkaSourceError(f"topic {topic!r} is not available: "
                                       f"{info.error if info is not None else 'no metadata'}")
            out.extend((topic, p) for p in info.partitions)
        return sorted(out)

    def watermarks(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """``(log_start_offset, high_watermark)`` per partition (ListOffsets earliest/latest)."""
        from confluent_kafka import KafkaException, TopicPartition
        # Spark's Kafka source options and defaults: a leader that just died
        # (its broker SIGKILLed) answers nothing until the controller elects
        # another, seconds later; without retries the query would fail.
        retries = int(self.options.get("fetchoffset.numretries", "3"))
        interval_s = int(self.options.get("fetchoffset.retryintervalms", "1000")) / 1000
        out = {}
        for topic, partition in tps:
            for attempt in range(retries + 1):
                try:
                    out[(topic, partition)] = self._consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=self.timeout_s, cached=False)
                    break
                except KafkaException:
                    if attempt == retries:
                        raise
                    time.sleep(interval_s)
        return out

    def resolve(self, spec, tps: list[tuple[str, int]], ending: bool,
                marks: dict | None = None) -> dict[tuple[str, int], int]:
        """Concrete offsets for ``spec`` (earliest / latest / per-partition JSON).

        Partitions missing from a JSON spec take the default: earliest for a
        start, latest for an end (Spark requires them all; being lenient costs
        nothing here).
        """
        marks = marks if marks is not None else self.watermarks(tps)
        out = {}
        for tp in tps:
            low, high = marks[tp]
            if spec == "earliest":
                value = EARLIEST
            elif spec == "latest":
                value = LATEST
            else:
                value = spec.get(tp, LATEST if ending else EARLIEST)
            if value == EARLIEST:
                if ending:
                    raise KafkaSourceError("endingOffsets cannot be earliest (-2)")
                value = low
            elif value == LATEST:
                value = high
            elif value < 0:
                raise KafkaSourceError(f"bad offset {value} for {tp}")
            out[tp] = value
        return out


def plan_ranges(start: Mapping[tuple[str, int], int], end: Mapping[tuple[str, int], int],
                min_partitions: int = 0) -> list[OffsetRange]:
    """One range per topic partition with data, split further if ``minPartitions`` asks.

    Like Spark's KafkaOffsetRangeCalculator: when fewer ranges than
    min_partitions exist, large ranges are cut into pieces proportional to
    their share of the total, so each Spark task reads a similar amount.
    """
    ranges = []
    for tp in sorted(end):
        frm = start.get(tp, 0)
        until = end[tp]
        if until < frm:
            raise KafkaSourceError(f"{tp[0]}-{tp[1]}: ending offset {until} is before starting offset {frm}")
        if until > frm:
            ranges.append(OffsetRange(tp[0], tp[1], frm, until))
    if min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out = []
    for r in ranges:
        pieces = max(1, round(min_partitions * r.size / total))
        step = -(-r.size // pieces)
        for frm in range(r.from_offset, r.until_offset, step):
            out.append(OffsetRange(r.topic, r.partition, frm, min(frm + step, r.until_offset)))
    return out


# ---------------------------------------------------------------- range reads

def read_range(options: Mapping[str, str], r: OffsetRange,
               batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[dict[str, list]]:
    """Read ``[from_offset, until_offset)`` of one partition, yielding column batches.

    Each yielded dict holds equal-length lists: key, value, topic, partition,
    offset, timestamp_ms, timestampType, headers (None or [(key, value)]).
    Offsets absent from the log (compaction, transaction markers) are skipped;
    the read ends at the first record at or past until_offset, or at a
    partition EOF at or past it.  If the log ends before until_offset and
    stays there for ``kafkaConsumer.pollTimeoutMs`` the read fails (Spark's
    failOnDataLoss=true), or ends quietly when ``failOnDataLoss`` is false.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    if r.size <= 0:
        return
    poll_timeout_s = int(options.get("kafkaconsumer.polltimeoutms", DEFAULT_POLL_TIMEOUT_MS)) / 1000
    fail_on_data_loss = options.get("failondataloss", "true").lower() != "false"
    consumer = Consumer(consumer_config(options))
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.from_offset)])
        next_offset = r.from_offset
        last_progress = time.monotonic()
        cols = _empty_columns()
        done = False
        while not done:
            msgs = consumer.consume(num_messages=min(batch_rows, 10_000), timeout=0.2)
            progressed = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= r.until_offset:
                            done = True
                            break
                        continue
                    raise KafkaSourceError(f"reading {r.topic}-{r.partition}: {err}")
                offset = m.offset()
                if offset >= r.until_offset:
                    done = True
                    break
                ts_type, ts_ms = m.timestamp()
                cols["key"].append(m.key())
                cols["value"].append(m.value())
                cols["offset"].append(offset)
                cols["timestamp_ms"].append(ts_ms)
                cols["timestampType"].append(_TIMESTAMP_TYPE_FROM_LIBRDKAFKA.get(ts_type, NO_TIMESTAMP_TYPE))
                cols["headers"].append(m.headers() or None)
                next_offset = offset + 1
                progressed = True
                if next_offset >= r.until_offset:
                    done = True
                    break
            if progressed:
                last_progress = time.monotonic()
            if len(cols["offset"]) >= batch_rows or (done and cols["offset"]):
                yield _finish_columns(cols, r)
                cols = _empty_columns()
            if not done and time.monotonic() - last_progress > poll_timeout_s:
                if fail_on_data_loss:
                    raise KafkaSourceError(
                        f"{r.topic}-{r.partition}: no record at offset {next_offset} within "
                        f"{poll_timeout_s:.0f} s, though the planned range ends at {r.until_offset} "
                        "(data lost or the partition shrank); set failOnDataLoss=false to ignore")
                break
        if cols["offset"]:
            yield _finish_columns(cols, r)
    finally:
        consumer.close()


def _empty_columns() -> dict[str, list]:
    return {"key": [], "value": [], "offset": [], "timestamp_ms": [], "timestampType": [], "headers": []}


def _finish_columns(cols: dict[str, list], r: OffsetRange) -> dict[str, list]:
    n = len(cols["offset"])
    cols["topic"] = [r.topic] * n
    cols["partition"] = [r.partition] * n
    return cols
