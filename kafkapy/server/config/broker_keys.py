"""The broker keys table (Kafka's ``KafkaConfig`` ConfigDef): one table is the
source of truth.

``BROKER_CONFIGS`` declares every broker setting kafkapy reads, with Kafka's
name, type, default, validator, importance, a one-line doc, and the
``server.properties`` section it is rendered under (``GROUP_ORDER``).
Everything else is derived from it: parsing and validation
(``broker_config.BrokerConfig.from_props``), the rendered ``server.properties``
(``properties.render_properties``), and the test that keeps
``config/server.properties`` in step with the table.  ``NOT_IN_EFFECT`` names
the keys accepted but not acted on yet, with the reason the README repeats.
"""

from __future__ import annotations

from kafkapy.server.config.types import (
    BOOLEAN,
    DOUBLE,
    HIGH,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    LOW,
    MEDIUM,
    PASSWORD,
    SHORT,
    STRING,
    ConfigKey,
    GzipLevel,
    Range,
    ValidList,
    ValidString,
    _at_least,
    _metadata_version,
)

# ---------------------------------------------------------------------------
# The broker table
# ---------------------------------------------------------------------------

_SERVER = "Server Basics"
_SOCKET = "Socket Server Settings"
_LOG = "Log Basics"
_FLUSH = "Log Flush Policy"
_RETENTION = "Log Retention Policy"
_CLEANER = "Log Cleaner"
_REPLICATION = "Replication"
_ZOOKEEPER = "ZooKeeper"
_GROUP = "Group Coordinator"
_TXN = "Transaction Coordinator"
_KAFKAPY = "kafkapy"
_SECURITY = "Security"

GROUP_ORDER = (_SERVER, _SOCKET, _SECURITY, _LOG, _FLUSH, _RETENTION, _CLEANER, _REPLICATION,
               _ZOOKEEPER, _GROUP, _TXN, _KAFKAPY)

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
DEFAULT_SECURITY_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

# Kafka's smallest segment: LegacyRecord.RECORD_OVERHEAD_V0 = crc 4 + magic 1 +
# attributes 1 + key length 4 + value length 4 = 14 bytes.
MIN_SEGMENT_BYTES = 14

# 1 MiB of records plus the 12-byte log overhead (offset i64 + size i32).
DEFAULT_MESSAGE_MAX_BYTES = 1024 * 1024 + 12


def _k(name, type_, default, validator, importance, group, doc) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, importance, doc, group)


_BROKER_KEYS = [
    # --- Server Basics
    _k("broker.id", INT, -1, None, HIGH, _SERVER,
       "Id of this broker; must be unique in the cluster. -1: not set."),
    _k("reserved.broker.max.id", INT, 1000, _at_least(0), MEDIUM, _SERVER,
       "Largest broker.id that may be configured by hand."),
    _k("broker.rack", STRING, None, None, MEDIUM, _SERVER,
       "Rack of this broker, used for rack-aware replica placement (e.g. an availability zone)."),
    _k("background.threads", INT, 10, _at_least(1), HIGH, _SERVER,
       "Threads for background work such as deleting expired log files."),
    _k("advertised.host.name", STRING, None, None, HIGH, _SERVER,
       "Deprecated (removed in Kafka 3.0): host given to clients; use advertised.listeners."),
    _k("auto.create.topics.enable", BOOLEAN, True, None, HIGH, _SERVER,
       "Create a topic with num.partitions partitions when a client asks for its metadata."),
    _k("max.request.partition.size.limit", INT, 2000, _at_least(1), MEDIUM, _SERVER,
       "Most partitions one DescribeTopicPartitions response describes (KIP-966)."),
    _k("delete.topic.enable", BOOLEAN, True, None, HIGH, _SERVER,
       "Allow DeleteTopics; when false, deletion requests are refused."),
    _k("controlled.shutdown.enable", BOOLEAN, True, None, MEDIUM, _SERVER,
       "Move partition leadership away before shutting down (cluster mode)."),
    _k("controlled.shutdown.max.retries", INT, 3, None, MEDIUM, _SERVER,
       "How many times a stopping broker asks the controller to move its leaderships before it stops anyway."),
    _k("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, MEDIUM, _SERVER,
       "Wait between controlled shutdown tries (after an error, or with leaderships left to move)."),
    _k("request.timeout.ms", INT, 30000, _at_least(0), HIGH, _SERVER,
       "How long the broker waits for a response to a request it sent itself (controller, replica fetch)."),
    # --- Socket Server Settings
    _k("listeners", STRING, "PLAINTEXT://:9092", None, HIGH, _SOCKET,
       "Comma-separated NAME://host:port endpoints to listen on; an empty host binds all interfaces."),
    _k("advertised.listeners", STRING, None, None, HIGH, _SOCKET,
       "Endpoints published to clients in Metadata responses, if different from listeners."),
    _k("listener.security.protocol.map", STRING, DEFAULT_SECURITY_PROTOCOL_MAP, None, LOW, _SOCKET,
       "NAME:PROTOCOL pairs giving each listener name its security protocol."),
    _k("inter.broker.listener.name", STRING, None, None, MEDIUM, _SOCKET,
       "Listener brokers use to reach each other (controller requests, replica fetches); "
       "unset: the first advertised listener."),
    _k("security.inter.broker.protocol", STRING, "PLAINTEXT",
       ValidString("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), MEDIUM, _SECURITY,
       "Security protocol brokers use to reach each other: the listener named after it (not with "
       "inter.broker.listener.name)."),
    _k("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None, MEDIUM, _SECURITY,
       "SASL mechanism of the brokers' own connections (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), with the "
       "username and password of the inter-broker listener's JAAS entry."),
    _k("num.network.threads", INT, 3, _at_least(1), HIGH, _SOCKET,
       "Network processor processes that read requests and write responses."),
    _k("num.io.threads", INT, 8, _at_least(1), HIGH, _SOCKET,
       "Request handler worker processes that decode requests and do the disk I/O."),
    _k("queued.max.requests", INT, 500, _at_least(1), HIGH, _SOCKET,
       "Requests that may wait for a handler before processors stop reading more."),
    _k("queued.max.request.bytes", LONG, -1, None, MEDIUM, _SOCKET,
       "Bytes of queued requests allowed before processors stop reading more; -1: no limit."),
    _k("socket.send.buffer.bytes", INT, 102400, None, HIGH, _SOCKET,
       "SO_SNDBUF of accepted sockets; -1: the OS default."),
    _k("socket.receive.buffer.bytes", INT, 102400, None, HIGH, _SOCKET,
       "SO_RCVBUF of accepted sockets; -1: the OS default."),
    _k("socket.request.max.bytes", INT, 104857600, _at_least(1), HIGH, _SOCKET,
       "Largest request accepted; a larger size prefix closes the connection (guards memory)."),
    _k("socket.listen.backlog.size", INT, 50, _at_least(1), MEDIUM, _SOCKET,
       "Backlog of pending connections passed to listen()."),
    _k("connections.max.idle.ms", LONG, 600000, None, MEDIUM, _SOCKET,
       "Connections idle for longer than this are closed."),
    _k("max.connections", INT, INT_MAX, _at_least(0), MEDIUM, _SOCKET,
       "Most connections the broker accepts at once."),
    _k("max.connections.per.ip", INT, INT_MAX, _at_least(0), MEDIUM, _SOCKET,
       "Most connections accepted from one IP address."),
    # Connection limits and client quotas (kafkapy/server/quotas; docs/architecture.md,
    # "Quotas and connection limits"); max.connections and
    # max.connection.creation.rate also as listener.name.<listener>.<key>.
    _k("max.connections.per.ip.overrides", STRING, "", None, MEDIUM, _SOCKET,
       "Per-IP or hostname overrides of max.connections.per.ip: 'hostName:100,127.0.0.1:200'."),
    _k("max.connection.creation.rate", INT, INT_MAX, _at_least(0), MEDIUM, _SOCKET,
       "Most new connections accepted per second by the broker (or a listener); more are delayed."),
    _k("quota.window.num", INT, 11, _at_least(1), LOW, _SOCKET,
       "Samples kept in memory for client quotas."),
    _k("quota.window.size.seconds", INT, 1, _at_least(1), LOW, _SOCKET,
       "Time span of each sample of client quotas."),
    _k("controller.quota.window.num", INT, 11, _at_least(1), LOW, _SOCKET,
       "Samples kept in memory for controller mutation quotas."),
    _k("controller.quota.window.size.seconds", INT, 1, _at_least(1), LOW, _SOCKET,
       "Time span of each sample of controller mutation quotas."),
    _k("fetch.max.bytes", INT, 57671680, _at_least(1024), MEDIUM, _SOCKET,
       "Largest number of bytes returned for one Fetch request."),
    _k("max.incremental.fetch.session.cache.slots", INT, 1000, _at_least(0), MEDIUM, _SOCKET,
       "Most incremental fetch sessions (KIP-227) kept, in 8 shards of slots/8."),
    # Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (KIP-227 named it a config).
    _k("min.incremental.fetch.session.eviction.ms", LONG, 120000, _at_least(0), LOW, _SOCKET,
       "A fetch session unused this long may be evicted by any new one."),
    # --- Security (kafkapy.server.security reads them, per listener through
    # listener.name.<listener>.<key> overrides, as Kafka's ListenerName.configPrefix)
    _k("ssl.keystore.type", STRING, "JKS", None, MEDIUM, _SECURITY,
       "Format of the key store: JKS, PKCS12 (either read whatever the file is, as Java does) or PEM."),
    _k("ssl.keystore.location", STRING, None, None, HIGH, _SECURITY,
       "The key store file: a JKS or PKCS12 store, or PEM with the private key and its certificate chain."),
    _k("ssl.keystore.password", PASSWORD, None, None, HIGH, _SECURITY,
       "The JKS or PKCS12 key store's password (required with one); not used for PEM key stores."),
    _k("ssl.keystore.certificate.chain", PASSWORD, None, None, HIGH, _SECURITY,
       "Certificate chain in PEM, given inline instead of ssl.keystore.location."),
    _k("ssl.keystore.key", PASSWORD, None, None, HIGH, _SECURITY,
       "Private key in PEM (PKCS#8, encrypted when ssl.key.password is set), inline."),
    _k("ssl.key.password", PASSWORD, None, None, HIGH, _SECURITY,
       "Password of the private key."),
    _k("ssl.truststore.type", STRING, "JKS", None, MEDIUM, _SECURITY,
       "Format of the trust store: JKS, PKCS12 or PEM, as ssl.keystore.type."),
    _k("ssl.truststore.location", STRING, None, None, HIGH, _SECURITY,
       "The CA certificates client certificates are verified against: a JKS or PKCS12 store, or PEM."),
    _k("ssl.truststore.password", PASSWORD, None, None, HIGH, _SECURITY,
       "The JKS or PKCS12 trust store's password (without one it is read unchecked); not used for PEM."),
    _k("ssl.truststore.certificates", PASSWORD, None, None, HIGH, _SECURITY,
       "Trusted certificates in PEM, inline instead of ssl.truststore.location."),
    _k("ssl.client.auth", STRING, "none", ValidString("required", "requested", "none"), MEDIUM, _SECURITY,
       "Client certificates: required, requested (verified when sent) or none."),
    _k("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], None, MEDIUM, _SECURITY,
       "TLS versions accepted."),
    _k("ssl.protocol", STRING, "TLSv1.3", None, MEDIUM, _SECURITY,
       "TLS protocol of the context (TLSv1.2 or TLSv1.3); ssl.enabled.protocols bounds it."),
    _k("ssl.cipher.suites", LIST, [], None, LOW, _SECURITY,
       "Cipher suites allowed (TLS 1.2 names, OpenSSL or IANA spelling); empty: the defaults."),
    _k("ssl.endpoint.identification.algorithm", STRING, "https", None, LOW, _SECURITY,
       "Host name verification of the peer; a server does not verify client host names."),
    _k("ssl.principal.mapping.rules", STRING, "DEFAULT", None, LOW, _SECURITY,
       "Rules mapping a client certificate's distinguished name to a user name (Kafka's syntax)."),
    _k("sasl.enabled.mechanisms", LIST, ["GSSAPI"], None, MEDIUM, _SECURITY,
       "SASL mechanisms offered on SASL listeners; kafkapy implements PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
       "OAUTHBEARER (unsecured JWS validator)."),
    _k("sasl.jaas.config", PASSWORD, None, None, MEDIUM, _SECURITY,
       "JAAS login module configuration (PLAIN users: user_<name>=\"<password>\")."),
    _k("sasl.server.max.receive.size", INT, 524288, None, LOW, _SECURITY,
       "Largest request accepted before a SASL connection has authenticated."),
    _k("connection.failed.authentication.delay.ms", INT, 100, _at_least(0), LOW, _SECURITY,
       "Delay before a connection that failed authentication is answered and closed."),
    _k("authorizer.class.name", STRING, "",
       ValidString("", "kafka.security.authorizer.AclAuthorizer",
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer"), LOW, _SECURITY,
       "The authorizer: Kafka's ACL authorizer class name enables ACLs (server/security/authorizer.py)."),
    _k("super.users", STRING, "", None, LOW, _SECURITY,
       "Principals allowed everything, separated by ';' (User:admin;User:broker)."),
    _k("allow.everyone.if.no.acl.found", BOOLEAN, False, None, LOW, _SECURITY,
       "With an authorizer: allow an operation on a resource that has no ACLs at all."),
    _k("connections.max.reauth.ms", LONG, 0, _at_least(0), MEDIUM, _SECURITY,
       "Session lifetime told to SASL clients (KIP-368); a connection not re-authenticated within it is "
       "closed on its next request; 0: sessions do not expire. Per listener and mechanism as "
       "listener.name.<l>.<mechanism>.connections.max.reauth.ms."),
    # --- Log Basics
    _k("log.dirs", LIST, None, None, HIGH, _LOG,
       "Comma-separated directories holding the partition logs; log.dir is used if unset."),
    _k("log.dir", LIST, ["/tmp/kafka-logs"], None, HIGH, _LOG,
       "Directory holding the partition logs when log.dirs is not set."),
    _k("num.partitions", INT, 1, _at_least(1), MEDIUM, _LOG,
       "Partitions of an automatically created topic (and the CreateTopics default)."),
    _k("default.replication.factor", INT, 1, None, MEDIUM, _LOG,
       "Replication factor of an automatically created topic (and the CreateTopics default)."),
    _k("num.recovery.threads.per.data.dir", INT, 1, _at_least(1), HIGH, _LOG,
       "Parallelism per log dir for recovery at start-up and flushing at shutdown."),
    _k("message.max.bytes", INT, DEFAULT_MESSAGE_MAX_BYTES, _at_least(0), HIGH, _LOG,
       "Largest record batch accepted (topic override: max.message.bytes)."),
    _k("log.segment.bytes", INT, 1073741824, _at_least(MIN_SEGMENT_BYTES), HIGH, _LOG,
       "Size at which the active segment is rolled."),
    _k("log.roll.ms", LONG, None, None, HIGH, _LOG,
       "Age of the active segment's first record at which it is rolled; log.roll.hours if unset."),
    _k("log.roll.hours", INT, 168, _at_least(1), HIGH, _LOG,
       "Segment roll age in hours, used when log.roll.ms is unset."),
    _k("log.roll.jitter.ms", LONG, None, None, HIGH, _LOG,
       "Random jitter subtracted from the roll age; log.roll.jitter.hours if unset."),
    _k("log.roll.jitter.hours", INT, 0, _at_least(0), HIGH, _LOG,
       "Roll jitter in hours, used when log.roll.jitter.ms is unset."),
    _k("log.index.size.max.bytes", INT, 10485760, _at_least(4), MEDIUM, _LOG,
       "Preallocated size of each offset and time index; a full index rolls the segment."),
    _k("log.index.interval.bytes", INT, 4096, _at_least(0), MEDIUM, _LOG,
       "Bytes appended between two offset index entries."),
    _k("log.message.timestamp.type", STRING, "CreateTime", ValidString(*TIMESTAMP_TYPES), MEDIUM, _LOG,
       "Whether stored timestamps are the producer's (CreateTime) or the broker's (LogAppendTime)."),
    _k("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, _at_least(0), MEDIUM, _LOG,
       "Largest allowed gap between a CreateTime timestamp and the broker's clock."),
    _k("log.message.timestamp.before.max.ms", LONG, LONG_MAX, _at_least(0), MEDIUM, _LOG,
       "How far a CreateTime timestamp may lie before the broker's clock (KIP-937)."),
    _k("log.message.timestamp.after.max.ms", LONG, LONG_MAX, _at_least(0), MEDIUM, _LOG,
       "How far a CreateTime timestamp may lie after the broker's clock (KIP-937)."),
    _k("log.message.format.version", STRING, "3.0-IV1", _metadata_version, MEDIUM, _LOG,
       "Deprecated since Kafka 3.0: ignored, batches are always stored in format v2."),
    _k("log.message.downconversion.enable", BOOLEAN, True, None, LOW, _LOG,
       "Whether old fetch versions may get records converted to an older format."),
    _k("log.preallocate", BOOLEAN, False, None, MEDIUM, _LOG,
       "Preallocate segment files at their full size on roll."),
    _k("compression.type", STRING, "producer", ValidString(*COMPRESSION_TYPES), HIGH, _LOG,
       "Final compression of stored batches; producer keeps the producer's codec."),
    _k("compression.gzip.level", INT, -1, GzipLevel(), MEDIUM, _LOG,
       "Level of gzip when compression.type recompresses to gzip; -1: zlib's default (6)."),
    _k("compression.lz4.level", INT, 9, Range.between(1, 17), MEDIUM, _LOG,
       "Level of lz4 when compression.type recompresses to lz4."),
    _k("compression.zstd.level", INT, 3, Range.between(-131072, 22), MEDIUM, _LOG,
       "Level of zstd when compression.type recompresses to zstd."),
    _k("min.insync.replicas", INT, 1, _at_least(1), HIGH, _LOG,
       "In-sync replicas required for an acks=all produce to succeed."),
    # --- Log Flush Policy
    _k("log.flush.interval.messages", LONG, LONG_MAX, _at_least(1), HIGH, _FLUSH,
       "Records appended to a partition before its log is fsynced."),
    _k("log.flush.interval.ms", LONG, None, None, HIGH, _FLUSH,
       "Most time a record may stay unflushed; log.flush.scheduler.interval.ms if unset."),
    _k("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, HIGH, _FLUSH,
       "How often the flusher checks whether any log needs an fsync."),
    _k("log.flush.offset.checkpoint.interval.ms", INT, 60000, _at_least(0), HIGH, _FLUSH,
       "How often recovery-point checkpoints are written."),
    _k("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, _at_least(0), HIGH, _FLUSH,
       "How often log-start-offset checkpoints are written."),
    # --- Log Retention Policy
    _k("log.retention.hours", INT, 168, None, HIGH, _RETENTION,
       "Time-based retention in hours; overridden by log.retention.minutes and log.retention.ms."),
    _k("log.retention.minutes", INT, None, None, HIGH, _RETENTION,
       "Time-based retention in minutes; overridden by log.retention.ms."),
    _k("log.retention.ms", LONG, None, None, HIGH, _RETENTION,
       "Time-based retention in milliseconds; -1: keep forever."),
    _k("log.retention.bytes", LONG, -1, None, HIGH, _RETENTION,
       "Size a partition may reach before its oldest segments are deleted; -1: no limit."),
    _k("log.retention.check.interval.ms", LONG, 300000, _at_least(1), MEDIUM, _RETENTION,
       "How often segments are checked against the retention limits."),
    _k("log.cleanup.policy", LIST, ["delete"], ValidList(*CLEANUP_POLICIES), MEDIUM, _RETENTION,
       "delete: drop old segments; compact: keep the latest record per key."),
    _k("log.segment.delete.delay.ms", LONG, 60000, _at_least(0), HIGH, _RETENTION,
       "Delay between renaming a segment to .deleted and removing its files."),
    _k("log.local.retention.ms", LONG, -2, _at_least(-2), MEDIUM, _RETENTION,
       "Tiered storage: time local segments are kept; -2: retention.ms (tiered storage is off here)."),
    _k("log.local.retention.bytes", LONG, -2, _at_least(-2), MEDIUM, _RETENTION,
       "Tiered storage: local size kept per partition; -2: retention.bytes (tiered storage is off here)."),
    # --- Log Cleaner
    _k("log.cleaner.backoff.ms", LONG, 15000, _at_least(0), MEDIUM, _CLEANER,
       "The amount of time to sleep when there are no logs to clean."),
    _k("log.cleaner.enable", BOOLEAN, True, None, MEDIUM, _CLEANER,
       "Run the log cleaner for compacted topics."),
    _k("log.cleaner.threads", INT, 1, _at_least(0), MEDIUM, _CLEANER,
       "Background threads that clean compacted logs."),
    _k("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, MEDIUM, _CLEANER,
       "Memory for deduplicating keys, over all cleaner threads."),
    _k("log.cleaner.io.buffer.size", INT, 524288, _at_least(0), MEDIUM, _CLEANER,
       "Memory for the cleaner's read and write buffers, over all cleaner threads."),
    _k("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, MEDIUM, _CLEANER,
       "Load factor of the cleaner's deduplication buffer."),
    _k("log.cleaner.io.max.bytes.per.second", DOUBLE, 1.7976931348623157e308, None, MEDIUM, _CLEANER,
       "Throttle on the cleaner's read plus write I/O."),
    _k("log.cleaner.delete.retention.ms", LONG, 86400000, _at_least(0), MEDIUM, _CLEANER,
       "How long tombstones are kept in compacted topics."),
    _k("log.cleaner.min.compaction.lag.ms", LONG, 0, _at_least(0), MEDIUM, _CLEANER,
       "Minimum age of a record before it may be compacted."),
    _k("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, _at_least(1), MEDIUM, _CLEANER,
       "Maximum age of a record before it must be eligible for compaction."),
    _k("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, Range.between(0.0, 1.0), MEDIUM, _CLEANER,
       "Dirty-to-total ratio at which a log becomes eligible for cleaning."),
    # --- Replication
    _k("unclean.leader.election.enable", BOOLEAN, False, None, HIGH, _REPLICATION,
       "Allow an out-of-sync replica to become leader (may lose data)."),
    _k("replica.lag.time.max.ms", LONG, 30000, None, HIGH, _REPLICATION,
       "A follower that has not caught up for this long leaves the ISR."),
    _k("num.replica.fetchers", INT, 1, None, HIGH, _REPLICATION,
       "Fetcher threads per source broker."),
    _k("num.replica.alter.log.dirs.threads", INT, None, None, HIGH, _REPLICATION,
       "Threads moving replicas between log dirs; unset: one per log dir."),
    _k("auto.leader.rebalance.enable", BOOLEAN, True, None, HIGH, _REPLICATION,
       "Move leadership back to preferred replicas in the background."),
    _k("leader.imbalance.check.interval.seconds", LONG, 300, _at_least(1), HIGH, _REPLICATION,
       "How often the controller checks partition leadership balance."),
    _k("leader.imbalance.per.broker.percentage", INT, 10, None, HIGH, _REPLICATION,
       "Leader imbalance allowed per broker, in percent, before a rebalance."),
    _k("replica.fetch.max.bytes", INT, 1048576, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes a follower asks for per partition in one fetch."),
    _k("replica.fetch.wait.max.ms", INT, 500, None, HIGH, _REPLICATION,
       "Longest wait a follower's fetch asks the leader for."),
    _k("replica.fetch.min.bytes", INT, 1, None, HIGH, _REPLICATION,
       "Bytes a follower's fetch waits for."),
    _k("replica.fetch.backoff.ms", INT, 1000, _at_least(0), MEDIUM, _REPLICATION,
       "How long a follower waits before fetching a partition again after an error."),
    _k("replica.fetch.response.max.bytes", INT, 10485760, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes a follower asks for in one fetch across partitions."),
    _k("replica.socket.timeout.ms", INT, 30000, None, HIGH, _REPLICATION,
       "Socket timeout of replica fetch connections."),
    _k("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None, HIGH, _REPLICATION,
       "How often high watermarks are checkpointed to disk."),
    # Kafka's dynamic-only broker quotas (DynamicConfig.Broker): set with AlterConfigs
    # on the broker (replication.quota: docs/architecture.md, "Partition reassignment")
    _k("leader.replication.throttled.rate", LONG, LONG_MAX, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes/s this broker sends as leader for leader.replication.throttled.replicas."),
    _k("follower.replication.throttled.rate", LONG, LONG_MAX, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes/s this broker's fetchers take in for follower.replication.throttled.replicas."),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, _at_least(0), MEDIUM, _REPLICATION,
       "Bytes/s of replica moves between log dirs (accepted; such moves are not supported)."),
    # --- ZooKeeper
    _k("zookeeper.max.in.flight.requests", INT, 10, _at_least(1), HIGH, _ZOOKEEPER,
       "Unacknowledged requests the ZooKeeper client sends before blocking."),
    _k("zookeeper.connect", STRING, None, None, HIGH, _ZOOKEEPER,
       "host:port[,host:port][/chroot] of the ZooKeeper ensemble; unset: embedded single-broker metadata."),
    _k("zookeeper.session.timeout.ms", INT, 18000, None, HIGH, _ZOOKEEPER,
       "ZooKeeper session timeout."),
    _k("zookeeper.connection.timeout.ms", INT, None, None, HIGH, _ZOOKEEPER,
       "Longest wait to connect to ZooKeeper; zookeeper.session.timeout.ms if unset."),
    # Securing ZooKeeper (kafkapy.server.security.zookeeper; docs/architecture.md,
    # "Security"): SASL comes from the JAAS file's Client section named by
    # -Djava.security.auth.login.config in KAFKA_OPTS, as Kafka's JVM reads it.
    _k("zookeeper.set.acl", BOOLEAN, False, None, HIGH, _ZOOKEEPER,
       "Create znodes with secure ACLs (creator-all, world-read; creator-only on sensitive paths); "
       "needs SASL (a JAAS Client section) or TLS with a client certificate."),
    _k("zookeeper.ssl.client.enable", BOOLEAN, False, None, MEDIUM, _ZOOKEEPER,
       "Connect to ZooKeeper with TLS (its secureClientPort)."),
    _k("zookeeper.clientCnxnSocket", STRING, None, None, MEDIUM, _ZOOKEEPER,
       "Java ZooKeeper client socket class (org.apache.zookeeper.ClientCnxnSocketNetty for TLS)."),
    _k("zookeeper.ssl.keystore.location", STRING, None, None, MEDIUM, _ZOOKEEPER,
       "PEM file with the client certificate chain and private key, for TLS to ZooKeeper."),
    _k("zookeeper.ssl.keystore.password", PASSWORD, None, None, MEDIUM, _ZOOKEEPER,
       "Password of the key in zookeeper.ssl.keystore.location (ZooKeeper uses the store's password "
       "for the key)."),
    _k("zookeeper.ssl.keystore.type", STRING, None, None, MEDIUM, _ZOOKEEPER,
       "Key store format; kafkapy reads PEM only; unset: by the file's extension."),
    _k("zookeeper.ssl.truststore.location", STRING, None, None, MEDIUM, _ZOOKEEPER,
       "PEM file with the CA certificates ZooKeeper's certificate is verified against; unset: the system's."),
    _k("zookeeper.ssl.truststore.password", PASSWORD, None, None, MEDIUM, _ZOOKEEPER,
       "Trust store password; not used for PEM trust stores."),
    _k("zookeeper.ssl.truststore.type", STRING, None, None, MEDIUM, _ZOOKEEPER,
       "Trust store format; kafkapy reads PEM only; unset: by the file's extension."),
    _k("zookeeper.ssl.protocol", STRING, "TLSv1.2", None, LOW, _ZOOKEEPER,
       "TLS protocol to ZooKeeper; the only one enabled unless zookeeper.ssl.enabled.protocols is set."),
    _k("zookeeper.ssl.enabled.protocols", LIST, None, None, LOW, _ZOOKEEPER,
       "TLS versions enabled to ZooKeeper (TLSv1.2, TLSv1.3); unset: zookeeper.ssl.protocol."),
    _k("zookeeper.ssl.cipher.suites", LIST, None, None, LOW, _ZOOKEEPER,
       "TLS 1.2 cipher suites to ZooKeeper (IANA or OpenSSL names); unset: the defaults."),
    _k("zookeeper.ssl.endpoint.identification.algorithm", STRING, "HTTPS", None, LOW, _ZOOKEEPER,
       "HTTPS (any case): check ZooKeeper's host name against its certificate; empty: do not."),
    _k("zookeeper.ssl.crl.enable", BOOLEAN, False, None, LOW, _ZOOKEEPER,
       "Check certificate revocation lists in TLS to ZooKeeper."),
    _k("zookeeper.ssl.ocsp.enable", BOOLEAN, False, None, LOW, _ZOOKEEPER,
       "Check certificates with OCSP in TLS to ZooKeeper."),
    # --- Group Coordinator
    _k("group.initial.rebalance.delay.ms", INT, 3000, None, MEDIUM, _GROUP,
       "How long the first rebalance of an empty group waits for more members."),
    _k("group.min.session.timeout.ms", INT, 6000, None, MEDIUM, _GROUP,
       "Smallest session timeout a consumer may ask for."),
    _k("group.max.session.timeout.ms", INT, 1800000, None, MEDIUM, _GROUP,
       "Largest session timeout a consumer may ask for."),
    _k("group.max.size", INT, INT_MAX, _at_least(1), MEDIUM, _GROUP,
       "Most members one consumer group may have."),
    # KIP-848 (the "consumer" group protocol): the broker, not the client,
    # owns session and heartbeat timing; a member's ConsumerGroupHeartbeat
    # cannot ask for other values. Kafka checks min <= value <= max for both
    # (GroupCoordinatorConfig); server.coordinator_process.coordinator_config does too.
    _k("group.consumer.heartbeat.interval.ms", INT, 5000, _at_least(1), MEDIUM, _GROUP,
       "Heartbeat interval given to members of consumer (KIP-848) groups."),
    _k("group.consumer.min.heartbeat.interval.ms", INT, 5000, _at_least(1), MEDIUM, _GROUP,
       "Smallest allowed group.consumer.heartbeat.interval.ms."),
    _k("group.consumer.max.heartbeat.interval.ms", INT, 15000, _at_least(1), MEDIUM, _GROUP,
       "Largest allowed group.consumer.heartbeat.interval.ms."),
    _k("group.consumer.session.timeout.ms", INT, 45000, _at_least(1), MEDIUM, _GROUP,
       "Session timeout of members of consumer (KIP-848) groups."),
    _k("group.consumer.min.session.timeout.ms", INT, 45000, _at_least(1), MEDIUM, _GROUP,
       "Smallest allowed group.consumer.session.timeout.ms."),
    _k("group.consumer.max.session.timeout.ms", INT, 60000, _at_least(1), MEDIUM, _GROUP,
       "Largest allowed group.consumer.session.timeout.ms."),
    _k("group.consumer.assignors", LIST, ["uniform", "range"], None, MEDIUM, _GROUP,
       "Server-side assignors of consumer groups (uniform, range, or Kafka's class names); "
       "the first is the default."),
    _k("group.consumer.max.size", INT, INT_MAX, _at_least(1), MEDIUM, _GROUP,
       "Most members one consumer (KIP-848) group may have."),
    _k("offsets.topic.num.partitions", INT, 50, _at_least(1), HIGH, _GROUP,
       "Partitions of __consumer_offsets (do not change after deployment)."),
    _k("offsets.topic.replication.factor", SHORT, 3, _at_least(1), HIGH, _GROUP,
       "Replication factor of __consumer_offsets."),
    _k("offsets.topic.segment.bytes", INT, 104857600, _at_least(1), HIGH, _GROUP,
       "Segment size of __consumer_offsets."),
    _k("offsets.retention.minutes", INT, 10080, _at_least(1), HIGH, _GROUP,
       "How long committed offsets of an empty group are kept."),
    _k("offsets.retention.check.interval.ms", LONG, 600000, _at_least(1), HIGH, _GROUP,
       "How often stale offsets are looked for."),
    _k("offsets.commit.timeout.ms", INT, 5000, _at_least(1), HIGH, _GROUP,
       "Longest wait for an offset commit to be replicated."),
    _k("offset.metadata.max.bytes", INT, 4096, None, HIGH, _GROUP,
       "Largest metadata string stored with an offset commit."),
    # --- Transaction Coordinator
    _k("transactional.id.expiration.ms", INT, 604800000, _at_least(1), HIGH, _TXN,
       "How long a transactional id is kept without status updates."),
    _k("transaction.max.timeout.ms", INT, 900000, _at_least(1), HIGH, _TXN,
       "Largest transaction timeout a producer may ask for."),
    _k("transaction.state.log.num.partitions", INT, 50, _at_least(1), HIGH, _TXN,
       "Partitions of __transaction_state."),
    _k("transaction.state.log.replication.factor", SHORT, 3, _at_least(1), HIGH, _TXN,
       "Replication factor of __transaction_state."),
    _k("transaction.state.log.min.isr", INT, 2, _at_least(1), HIGH, _TXN,
       "min.insync.replicas of __transaction_state."),
    _k("transaction.state.log.segment.bytes", INT, 104857600, _at_least(1), HIGH, _TXN,
       "Segment size of __transaction_state."),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, _at_least(1), LOW, _TXN,
       "How often transactions open past their timeout are looked for (and aborted)."),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, _at_least(1), LOW, _TXN,
       "How often transactional ids past transactional.id.expiration.ms are removed."),
    _k("producer.id.expiration.ms", INT, 86400000, _at_least(1), LOW, _TXN,
       "How long idempotence state of an inactive producer id is kept."),
    _k("transaction.partition.verification.enable", BOOLEAN, True, None, LOW, _TXN,
       "Before a partition leader writes a transactional batch for a producer with no transaction open on "
       "that partition, it asks the transaction coordinator whether the partition was added to the "
       "producer's transaction (KIP-890): a late or stray write cannot leave a hanging transaction."),
    # --- kafkapy's own
    _k("prometheus.host", STRING, "127.0.0.1", None, LOW, _KAFKAPY,
       "Address of the Prometheus metrics endpoint."),
    _k("prometheus.port", INT, 0, Range.between(0, 65535), LOW, _KAFKAPY,
       "Port of the Prometheus metrics endpoint; 0: no endpoint."),
    _k("kafkapy.shutdown.timeout.ms", LONG, 30000, _at_least(0), MEDIUM, _KAFKAPY,
       "Bound on a clean shutdown after SIGTERM; children still alive after it are killed."),
    _k("kafkapy.network.inline.apis", LIST, ["Produce", "Fetch"], ValidList("Produce", "Fetch"), LOW, _KAFKAPY,
       "Requests a processor handles itself instead of handing them to the handler workers: "
       "the same handler code without two process hops (docs/architecture.md, \"Requests "
       "handled in the processor\"). Empty: every request goes to the workers."),
]

BROKER_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in _BROKER_KEYS}

# Keys accepted (parsed, validated, shown by DescribeConfigs) that change
# nothing yet, and why. Setting one logs a warning at start-up; the README
# lists them (a test keeps the two in step).
NOT_IN_EFFECT: dict[str, str] = {
    "zookeeper.max.in.flight.requests": "kazoo pipelines a session's requests without this bound",
    "zookeeper.clientCnxnSocket": "kazoo has one socket implementation, which speaks TLS when "
                                  "zookeeper.ssl.client.enable is true",
    "zookeeper.ssl.crl.enable": "Python's ssl module checks no revocation lists of its own",
    "zookeeper.ssl.ocsp.enable": "Python's ssl module has no OCSP checking",
    "num.replica.alter.log.dirs.threads": "replicas are never moved between log dirs",
    "replica.high.watermark.checkpoint.interval.ms":
        "high watermarks are checkpointed with the recovery points "
        "(log.flush.offset.checkpoint.interval.ms)",
    "producer.id.expiration.ms": "producer state is kept until its data leaves the log (no timed expiry yet); "
                                 "only the log cleaner honours it (an idle producer's last batch and marker can go)",
    "background.threads": "background work (retention, flush, checkpoints) runs in the "
                          "supervisor process, one task at a time",
    "num.recovery.threads.per.data.dir": "logs are recovered one at a time by the supervisor",
    "queued.max.request.bytes": "request memory is bounded by each processor's 64 MiB arena and "
                                "queued.max.requests",
    "advertised.host.name": "removed in Kafka 3.0; advertised.listeners is used",
    "replica.alter.log.dirs.io.max.bytes.per.second": "replicas are never moved between log dirs (no "
                                                      "AlterReplicaLogDirs)",
    "log.cleaner.threads": "compaction runs in one log-cleaner process, one log at a time (the value "
                           "still divides log.cleaner.dedupe.buffer.size, as Kafka's cleaner threads share it)",
    "log.message.format.version": "deprecated since Kafka 3.0; batches are always stored in format v2",
    "log.local.retention.ms": "no tiered storage: local retention is retention.ms",
    "log.local.retention.bytes": "no tiered storage: local retention is retention.bytes",
}
assert len(BROKER_CONFIGS) == len(_BROKER_KEYS), "duplicate broker config key"
for _key in _BROKER_KEYS:  # a default must pass its own validator (Kafka's define() checks too)
    if _key.has_default and _key.default is not None and _key.validator is not None:
        _key.validator(_key.name, _key.default)
del _key
