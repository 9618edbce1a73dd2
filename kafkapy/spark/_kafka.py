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
import logging
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
# Bound on out-of-range recoveries in one range read (failOnDataLoss=false):
# each moves the read forward to the log start, so more than a handful means
# the log start and the fetch position race (a topic deleted and re-created
# over and over); give up rather than spin.
_MAX_RECOVERIES = 100


log = logging.getLogger("kafkapy.spark")

# Spark's Kafka source texts, so a person searching for Spark's message finds
# the same explanation (KafkaSourceProvider's instructions, the
# KAFKA_DATA_LOSS error class of kafka-error-conditions.json).
_DATA_LOSS = ("Some data may have been lost because they are not available in Kafka any more; either the "
              "data was aged out by Kafka or the topic may have been deleted before all the data in the "
              "topic was processed.")
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    _DATA_LOSS + " If you don't want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "false".')
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    _DATA_LOSS + " If you want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "true".')
# The executors' consumer group in Spark's messages (no group is ever joined).
SOURCE_GROUP_ID = "kafkapy-spark-source"


class KafkaSourceError(RuntimeError):
    """A misconfigured source, an unknown topic, or lost data."""


class UnknownTopicOrPartition(KafkaSourceError):
    """A subscribed or assigned topic does not exist (Kafka's UnknownTopicOrPartitionException)."""


def fail_on_data_loss(options: Mapping[str, str]) -> bool:
    """Spark's ``failOnDataLoss`` (default true)."""
    return options.get("failondataloss", "true").strip().lower() != "false"


def report_data_loss(options: Mapping[str, str], message: str) -> None:
    """Spark's reportDataLoss: fail the query (failOnDataLoss true) or log a warning and go on."""
    if fail_on_data_loss(options):
        raise KafkaSourceError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


def tp_name(tp: tuple[str, int]) -> str:
    """Kafka's TopicPartition.toString, as Spark's messages print it: ``topic-partition``."""
    return f"{tp[0]}-{tp[1]}"


def tp_set(tps) -> str:
    """A set of partitions as Spark's messages print one (a Scala Set)."""
    return "Set(" + ", ".join(tp_name(tp) for tp in sorted(tps)) + ")"


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


def kafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """Every ``kafka.<name>`` option but the bootstrap servers, prefix stripped,
    as Spark hands them to Kafka's Java clients: what kafkapy's own client
    (the exactly-once writer) takes as they are, Java's names or librdkafka's."""
    return {k[len("kafka."):]: v for k, v in options.items()
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}


def client_config(options: Mapping[str, str]) -> dict[str, object]:
    """librdkafka settings: the ``kafka.<name>`` options, with Java's security
    names in librdkafka's (``librdkafka_security``)."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap_servers(options), "log_level": 3}
    config.update(librdkafka_security(kafka_settings(options)))
    return config


# Java client store keys librdkafka refuses ("Java TrustStores are not
# supported") or does not know: where any is given, or a PEM file is given as
# ssl.keystore.location (PKCS12 to librdkafka), the stores are read as
# kafkapy's client reads them and handed to librdkafka as PEM.
_JAVA_STORE_KEYS = frozenset(f"ssl.{name}" for name in (
    "truststore.location", "truststore.certificates", "truststore.type", "truststore.password",
    "keystore.type", "keystore.certificate.chain", "keystore.key"))
_STORE_KEYS = _JAVA_STORE_KEYS | {f"ssl.{name}" for name in (
    "keystore.location", "keystore.password", "key.password", "ca.location", "ca.pem",
    "certificate.location", "key.location", "certificate.pem", "key.pem")}
# Java-only TLS bounds librdkafka has no setting for (it negotiates TLS 1.2 or
# 1.3 by OpenSSL's defaults, as Kafka's default ssl.enabled.protocols does).
_JAVA_TLS_ONLY = ("ssl.protocol", "ssl.enabled.protocols")


def librdkafka_security(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` with a Java client's security names as librdkafka's.

    Spark's Kafka connector hands ``kafka.*`` to Java's clients, so Spark
    users write Java's names: ``ssl.truststore.*`` and ``ssl.keystore.*``
    (PEM, PKCS12 or JKS files, or inline PEM), ``sasl.jaas.config``, an empty
    ``ssl.endpoint.identification.algorithm``.  librdkafka (reads and
    at-least-once writes) refuses or misreads them, kafkapy's client
    (exactly-once writes) reads them; here they become ``ssl.ca.*``,
    ``ssl.certificate.*``/``ssl.key.*``, ``sasl.username``/``sasl.password``
    and ``none``.  librdkafka's own names pass unchanged.
    """
    from kafkapy.client.security import jaas_option
    from kafkapy.client.ssl_factory import client_stores

    out = dict(settings)
    if "sasl.jaas.config" in out:
        jaas = out.pop("sasl.jaas.config")
        for name in ("username", "password"):
            value = jaas_option(jaas, name)
            if value is not None:
                out.setdefault(f"sasl.{name}", value)
    for name in _JAVA_TLS_ONLY:
        if out.pop(name, None) is not None:
            log.info("%s is a Java client setting; librdkafka negotiates TLS 1.2 or 1.3", name)
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"   # Java's "no host name check"
    keystore = settings.get("ssl.keystore.location")
    if not (_JAVA_STORE_KEYS & settings.keys() or (keystore and _is_pem_file(keystore))):
        return out
    stores = client_stores(settings.get, "the Spark source")
    for name in _STORE_KEYS:
        out.pop(name, None)
    rendered = {"ssl.ca.location": stores.trust_file, "ssl.ca.pem": stores.trust_pem,
                "ssl.certificate.location": stores.cert_file,
                "ssl.key.location": stores.key_file or stores.cert_file,
                "ssl.certificate.pem": stores.chain_pem, "ssl.key.pem": stores.key_pem,
                "ssl.key.password": stores.key_password}
    out.update({k: v for k, v in rendered.items() if v})
    return out


def _is_pem_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(64).lstrip().startswith(b"-----BEGIN")
    except OSError:
        return False   # librdkafka names the missing file


def consumer_config(options: Mapping[str, str]) -> dict[str, object]:
    config = {
        # librdkafka insists on a group.id even for assign(); nothing is ever
        # committed and no group is joined.
        "group.id": SOURCE_GROUP_ID,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        # An offset below the log start (records deleted by retention or
        # DeleteRecords) is an error event, not a silent jump to the earliest
        # record: read_range decides what failOnDataLoss says.
        "auto.offset.reset": "error",
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


@dataclass(frozen=True)
class TimestampSpec:
    """Offsets by timestamp: ListOffsets with a timestamp, per partition.

    ``timestamps`` is one timestamp for every partition (Spark's
    ``startingTimestamp`` / ``endingTimestamp``) or ``{(topic, partition): ms}``
    (``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``).
    ``strategy`` is ``startingOffsetsByTimestampStrategy``: what a start does
    when no record has a timestamp at or after the one asked for
    (``error``, Spark's default, or ``latest``); an end resolves to latest.
    """
    timestamps: int | dict
    strategy: str = "error"


def offset_spec(options: Mapping[str, str], ending: bool, default: str):
    """Spark's getKafkaOffsetRangeLimit: the first given of ``<side>Timestamp``,
    ``<side>OffsetsByTimestamp``, ``<side>Offsets`` (in that order of
    preference), else ``default``; ``<side>`` is starting or ending."""
    side = "ending" if ending else "starting"
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaSourceError(f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', not {strategy!r}")
    if f"{side}timestamp" in options:
        text = options[f"{side}timestamp"].strip()
        try:
            return TimestampSpec(int(text), strategy)
        except ValueError:
            raise KafkaSourceError(f"Expected a single long value, got {text}") from None
    if f"{side}offsetsbytimestamp" in options:
        parsed = parse_offsets_option(options[f"{side}offsetsbytimestamp"], "")
        if not isinstance(parsed, dict):
            raise KafkaSourceError(f"{side}OffsetsByTimestamp must be JSON per partition, not {parsed!r}")
        return TimestampSpec(parsed, strategy)
    return parse_offsets_option(options.get(f"{side}offsets"), default)


def validate_batch_options(options: Mapping[str, str]) -> None:
    """Spark's validateBatchOptions: no latest start, no earliest end."""
    # (side, its default, the refused position, its JSON sentinel, Spark's two messages)
    for ending, default, refused, sentinel, whole, one in (
            (False, "earliest", "latest", LATEST, "starting offset", "startingOffsets for {}"),
            (True, "latest", "earliest", EARLIEST, "ending offset", "ending offset for {}")):
        spec = offset_spec(options, ending=ending, default=default)
        if spec == refused:
            raise KafkaSourceError(f"{whole} can't be {refused} for batch queries on Kafka")
        for tp, offset in (spec.items() if isinstance(spec, dict) else ()):
            if offset == sentinel:
                raise KafkaSourceError(f"{one.format(tp_name(tp))} can't be {refused} for batch queries on Kafka")
    _validate_general_options(options)
    for name, text in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                       ("minoffsetspertrigger", "minOffsetsPerTrigger"), ("maxtriggerdelay", "maxTriggerDelay")):
        if name in options:
            log.warning("%s option ignored in batch queries", text)


def validate_stream_options(options: Mapping[str, str]) -> None:
    """Spark's validateStreamOptions: no ending offsets in a stream."""
    if "endingoffsets" in options:
        raise KafkaSourceError("ending offset not valid in streaming queries")
    if "endingoffsetsbytimestamp" in options:
        raise KafkaSourceError("ending timestamp not valid in streaming queries")
    _validate_general_options(options)
    max_trigger_delay_ms(options)


def _validate_general_options(options: Mapping[str, str]) -> None:
    if "minpartitions" in options and int(options["minpartitions"]) <= 0:
        raise KafkaSourceError("minPartitions must be positive")
    if "minoffsetspertrigger" in options and "maxoffsetspertrigger" in options:
        low, high = int(options["minoffsetspertrigger"]), int(options["maxoffsetspertrigger"])
        if low > high:
            raise KafkaSourceError(f"The value of minOffsetPerTrigger({low}) is higher than the "
                                   f"maxOffsetsPerTrigger({high}).")


_TIME_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def max_trigger_delay_ms(options: Mapping[str, str]) -> int:
    """``maxTriggerDelay`` (Spark's default 15m) in ms; Spark's time strings
    (``500ms``, ``30s``, ``15m``, ``1h``; a bare number is ms)."""
    text = options.get("maxtriggerdelay", "15m").strip().lower()
    match = re.fullmatch(r"(\d+)\s*(ms|s|m|min|h|d)?", text)
    if match is None:
        raise KafkaSourceError(f"maxTriggerDelay: a time such as 30s or 15m, not {text!r}")
    return int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"]


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(raw: Mapping[str, Mapping[str, int]] | None) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(o) for topic, parts in (raw or {}).items() for p, o in parts.items()}


# -------------------------------------------------------------------- planning

# Kafka's internal topics (Topic.INTERNAL_TOPICS), which Admin.listTopics
# leaves out unless asked.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def pattern_topics(pattern: str, names) -> list[str]:
    """The topics ``subscribePattern`` selects, sorted: as Spark's
    SubscribePatternStrategy on its default Admin path (Spark >= 3.4,
    useDeprecatedOffsetFetching=false): every non-internal topic in which
    the regex is *found* anywhere (Scala's ``findFirstIn``, Java's
    ``Matcher.find``), not only those it matches whole.  ``a.*`` selects
    ``data-a1`` too; anchor it (``^a.*$``) for the whole-name match of
    Kafka's consumer subscription (Spark's deprecated consumer path).  The
    regex is Python's, which reads the common Java syntax alike."""
    regex = re.compile(pattern)
    return sorted(t for t in names if t not in INTERNAL_TOPICS and regex.search(t))


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
            # Spark's words (validateGeneralOptions).
            raise KafkaSourceError(
                f"{'One' if not given else 'Only one'} of the following options "
                f"{'must' if not given else 'can'} be specified for Kafka source: subscribe, "
                f"subscribepattern, assign. See the docs for more details.")
        if subscribe:
            return [t.strip() for t in subscribe.split(",") if t.strip()]
        if assign:
            return sorted(json.loads(assign))
        return pattern_topics(pattern, self._consumer.list_topics(timeout=self.timeout_s).topics)

    def partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) the options select, sorted, as Spark's
        ConsumerStrategy.assignedTopicPartitions on its Admin path (Spark's
        default since 3.4): the topics are described, and one that does not
        exist fails the call, retried as Spark retries offset fetches
        (``_with_retries``).  So a ``subscribe``d or ``assign``ed topic
        deleted under a running query fails the query whatever
        ``failOnDataLoss`` says; a ``subscribePattern`` selects among the
        topics that exist, so a deleted one drops out and the stream reports
        its partitions gone (KafkaStreamReader.partitions, per
        ``failOnDataLoss``).  ``assign`` keeps the assigned partitions its
        topics have."""
        assigned = None
        if self.options.get("assign"):
            assigned = {(t, int(p)) for t, ps in json.loads(self.options["assign"]).items() for p in ps}

        def describe() -> list[tuple[str, int]]:
            out = []
            for topic in self.topics():
                info = self._consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
                if info is None or info.error is not None or not info.partitions:
                    # Kafka's UnknownTopicOrPartitionException, as Spark's Admin call fails with it.
                    raise UnknownTopicOrPartition(
                        f"topic {topic!r} is not available: UnknownTopicOrPartitionException: This server "
                        f"does not host this topic-partition. ({info.error if info is not None else 'no metadata'})")
                out.extend((topic, p) for p in info.partitions if assigned is None or (topic, p) in assigned)
            return sorted(out)

        return self._with_retries(describe, False)

    def _with_retries(self, call, missing_ok: bool):
        """``call()`` retried as Spark's Kafka source retries offset fetches
        (``fetchOffset.numRetries`` 3, ``fetchOffset.retryIntervalMs`` 1000):
        a leader that just died (its broker SIGKILLed) answers nothing until
        the controller elects another, seconds later.  An unknown partition
        is None at once when ``missing_ok`` (its topic was deleted)."""
        from confluent_kafka import KafkaError, KafkaException
        retries = int(self.options.get("fetchoffset.numretries", "3"))
        interval_s = int(self.options.get("fetchoffset.retryintervalms", "1000")) / 1000
        for attempt in range(retries + 1):
            try:
                return call()
            except (KafkaException, UnknownTopicOrPartition) as exc:
                code = exc.args[0].code() if isinstance(exc, KafkaException) and exc.args else None
                if missing_ok and code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                                           KafkaError._UNKNOWN_TOPIC):
                    return None
                if attempt == retries:
                    raise
                time.sleep(interval_s)

    def watermarks(self, tps: list[tuple[str, int]],
                   missing_ok: bool = False) -> dict[tuple[str, int], tuple[int, int]]:
        """``(log_start_offset, high_watermark)`` per partition (ListOffsets
        earliest/latest); with ``missing_ok`` a deleted partition is left out."""
        from confluent_kafka import TopicPartition
        out = {}
        for topic, partition in tps:
            marks = self._with_retries(lambda: self._consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.timeout_s, cached=False), missing_ok)
            if marks is not None:
                out[(topic, partition)] = tuple(marks)
        return out

    def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """ListOffsets by timestamp: the first offset whose timestamp is at or
        after the one given, per partition; -1 where no record is that late."""
        from confluent_kafka import TopicPartition
        asked = [TopicPartition(t, p, ts) for (t, p), ts in sorted(timestamps.items())]
        if not asked:
            return {}
        found = self._with_retries(lambda: self._consumer.offsets_for_times(asked, timeout=self.timeout_s), False)
        for tp in found:
            if tp.error is not None:
                raise KafkaSourceError(f"offsets by timestamp for {tp.topic}-{tp.partition}: {tp.error}")
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def resolve(self, spec, tps: list[tuple[str, int]], ending: bool,
                marks: dict | None = None) -> dict[tuple[str, int], int]:
        """Concrete offsets for ``spec`` (earliest / latest / per-partition
        JSON / a ``TimestampSpec``).

        Partitions missing from a JSON spec take the default: earliest for a
        start, latest for an end (Spark requires them all; being lenient costs
        nothing here).  A timestamp no record reaches resolves to latest for
        an end; for a start it fails with Spark's message, or is latest with
        ``startingOffsetsByTimestampStrategy=latest``.
        """
        marks = marks if marks is not None else self.watermarks(tps)
        if isinstance(spec, TimestampSpec):
            default = LATEST if ending else EARLIEST
            asked = {tp: (spec.timestamps if isinstance(spec.timestamps, int) else spec.timestamps.get(tp))
                     for tp in tps}
            found = self.offsets_for_times({tp: ts for tp, ts in asked.items() if ts is not None})
            strategy, spec = spec.strategy, {}
            for tp in tps:
                if asked[tp] is None:
                    spec[tp] = default
                elif found[tp] >= 0:
                    spec[tp] = found[tp]
                elif ending or strategy == "latest":
                    spec[tp] = LATEST
                else:
                    raise KafkaSourceError(f"No offset matched from request of topic-partition {tp_name(tp)} "
                                           f"and timestamp {asked[tp]}.")
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
                    raise KafkaSourceError(f"ending offset for {tp_name(tp)} can't be earliest "
                                           "for batch queries on Kafka")
                value = low
            elif value == LATEST:
                value = high
            elif value < 0:
                raise KafkaSourceError(f"bad offset {value} for {tp_name(tp)}")
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
            # Spark's RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET.
            raise KafkaSourceError(
                f"The resolved start offset {frm} is greater than the resolved end offset {until} for topic "
                f"{tp[0]} partition {tp[1]}. There may be multiple reasons: 1. Start offset is set to too big "
                "a value that after resolution, end offset is smaller than it (a start by timestamp and an end "
                "by offset, or the reverse, or a start and the end latest). 2. The Kafka topic partition is broken.")
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
    partition EOF at or past it.

    Lost data, as Spark's KafkaDataConsumer treats it: the next offset is
    below the log start (retention or DeleteRecords moved it) when it is
    fetched; records come back past a gap and the log start is past the gap's
    first offset (records expired after their offsets were planned: Spark
    checks the log start at every gap, and so does this, once per poll that
    has one; a gap above the log start is compaction or a transaction
    marker, skipped silently); the partition is gone (its topic deleted); or
    the log ends before until_offset and stays there for
    ``kafkaConsumer.pollTimeoutMs``.  With ``failOnDataLoss`` true (the
    default) the task fails with Spark's KAFKA_DATA_LOSS text naming the
    offsets it could not read; false logs Spark's warning and reads on from
    the earliest offset still available (or ends the range when nothing of
    it is left).
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    if r.size <= 0:
        return
    poll_timeout_s = int(options.get("kafkaconsumer.polltimeoutms", DEFAULT_POLL_TIMEOUT_MS)) / 1000
    consumer = Consumer(consumer_config(options))
    gone = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)

    def lost(at: int, reason: str, until: int = r.until_offset,
             warning: str = "Cannot fetch offset {at}") -> None:
        """KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE for ``[at, until)``, or Spark's warning."""
        message = (f"[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] {_DATA_LOSS} If you don't want your "
                   "streaming query to fail on such cases, set the source option failOnDataLoss to false. "
                   f"Reason: Could not read records in offset [{at}, {until}) for topic partition "
                   f"{r.topic}-{r.partition} with consumer group {SOURCE_GROUP_ID} ({reason}).")
        if fail_on_data_loss(options):
            raise KafkaSourceError(message + " SQLSTATE: 22000")
        log.warning("%s (%s) (GroupId: %s, TopicPartition: %s-%d). %s", warning.format(at=at, until=until),
                    reason, SOURCE_GROUP_ID, r.topic, r.partition, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)

    def log_start() -> int:
        """The partition's log start offset now (ListOffsets earliest); -1 when it cannot be had."""
        from confluent_kafka import KafkaException
        try:
            return consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=10, cached=False)[0]
        except KafkaException:
            return -1

    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.from_offset)])
        next_offset = r.from_offset
        last_progress = time.monotonic()
        cols = _empty_columns()
        done = False
        recoveries = 0
        while not done:
            msgs = consumer.consume(num_messages=min(batch_rows, 10_000), timeout=0.2)
            progressed = False
            low = None   # the log start, looked up at this poll's first gap
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= r.until_offset:
                            done = True
                            break
                        continue
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        lost(next_offset, f"out of range: {err.str()}")
                        resume = _earliest_available(consumer, r, next_offset)
                        recoveries += 1
                        if recoveries > _MAX_RECOVERIES:
                            raise KafkaSourceError(f"{r.topic}-{r.partition}: offset {next_offset} kept moving "
                                                   f"out of range ({_MAX_RECOVERIES} recoveries)")
                        if resume is None:
                            done = True
                            break
                        log.warning("Some data may be lost. Recovering %s-%d from offset %d: records in "
                                    "[%d, %d) are skipped", r.topic, r.partition, resume, next_offset, resume)
                        next_offset = resume
                        consumer.assign([TopicPartition(r.topic, r.partition, resume)])
                        progressed = True
                        break
                    if err.code() in gone:
                        lost(next_offset, f"the partition is gone: {err.str()}")
                        done = True
                        break
                    raise KafkaSourceError(f"reading {r.topic}-{r.partition}: {err}")
                offset = m.offset()
                if offset > next_offset:
                    low = log_start() if low is None else low
                    if low > next_offset:   # expired after they were planned: lost, not compacted
                        lost(next_offset, f"the log starts at {low}", until=min(offset, r.until_offset),
                             warning="Skip missing records in [{at}, {until})")
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
                lost(next_offset, f"no record within {poll_timeout_s:.0f} s though the planned range ends at "
                                  f"{r.until_offset}: the partition shrank")
                break
        if cols["offset"]:
            yield _finish_columns(cols, r)
    finally:
        consumer.close()


def _earliest_available(consumer, r: OffsetRange, offset: int) -> int | None:
    """Where a read that lost ``offset`` goes on (Spark's
    getEarliestAvailableOffsetBetween): the log start when it lies inside
    ``[offset, until_offset)``, ``offset`` itself if it is back in the log,
    None when nothing of the range is left."""
    from confluent_kafka import KafkaException, TopicPartition
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=10, cached=False)
    except KafkaException:
        return None
    if offset >= high or low >= r.until_offset:
        return None
    return max(offset, low)


def _empty_columns() -> dict[str, list]:
    return {"key": [], "value": [], "offset": [], "timestamp_ms": [], "timestampType": [], "headers": []}


def _finish_columns(cols: dict[str, list], r: OffsetRange) -> dict[str, list]:
    n = len(cols["offset"])
    cols["topic"] = [r.topic] * n
    cols["partition"] = [r.partition] * n
    return cols
