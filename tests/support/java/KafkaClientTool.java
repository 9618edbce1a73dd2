// Apache's Java client (kafka-clients, unmodified) as a command-line test client.
//
// Compiled by tests/support/java_client.py with javac against the kafka-clients
// jar, once per source hash.  Every command writes plain tab-separated lines to
// stdout, one per event, flushed at once, so a test can parse them without a
// JSON library on either side; keys and values are hex ("-" for null) so any
// bytes survive.  Diagnostics go to stderr.  Exit code 0 = the command did what
// it was asked, 1 = it ran but fell short (errors, too few records), 2 = usage.
//
//   produce --bootstrap B --topic T --count N [--acks A] [--idempotent true|false]
//           [--compression C] [--key-prefix P] [--value-size S] [--config k=v]...
//       ACK  <partition> <offset> <key-hex>       per acknowledged record
//       ERR  <key-hex> <exception class> <message> per failed record
//       DONE <acked> <failed>
//     Record i has key "<P>-<i>" and value "value-<i>-" padded with 'x' to S bytes
//     (compressible on purpose).  Client defaults apply unless overridden
//     (kafka-clients 3.x: acks=all, enable.idempotence=true).
//     [--transaction commit|abort] (with --config transactional.id=...): the
//     records are sent in one transaction (initTransactions, begin, send,
//     flush), then committed or aborted.
//
//   consume --bootstrap B --topic T --group G --count N --timeout-ms M [--config k=v]...
//       REC  <partition> <offset> <key-hex> <value-hex> <timestamp>
//       DONE <records> <committed: true|false>
//     Subscribes in group G (auto.offset.reset=earliest), polls until N records
//     or M ms, then commits synchronously and leaves the group.
//
//   copy --bootstrap B --input T --output U --partition P --group G
//        --transactional-id X [--transaction-size N] [--pause-ms M] [--abort-every K]
//        [--timeout-ms D] [--config k=v]...
//       TXN   <committed position> <records in the transaction>   per commit
//       ABORT <exception class | planned> <message>               per abort
//       FATAL <exception class> <message>
//       DONE  <records committed> <commits> <aborts> <final position> <end offset>
//     Kafka's TransactionalMessageCopier (its system test's copier): a
//     read_committed consumer assigned T-P in group G (committed offsets, else
//     the beginning) and a producer with transactional.id X; each poll (at most
//     N records) is sent to U-P in one transaction together with the consumer's
//     position (sendOffsetsToTransaction with the consumer's group metadata),
//     then committed.  Every K-th transaction is aborted on purpose (0: none).
//     A failed transaction is aborted and the consumer goes back to the group's
//     committed offset.  It stops once the committed position reaches T-P's end
//     offset as it was at the start (the input is written before), or after D ms.
//     While stdin is open it sleeps M ms between transactions (so a test's
//     faults meet a copier still at work); at EOF it goes at full speed.
//
//   admin --bootstrap B (create-topic T PARTITIONS | describe-cluster | describe-topic T)
//       TOPIC   <name> <partitions>
//       CLUSTER <cluster id> <controller id> <node count>
//       PARTITION <topic> <partition> <leader> <replicas comma list> <isr comma list>
//   admin --bootstrap B (reassign T P (REPLICAS comma list | -) | list-reassignments)
//       REASSIGN <topic> <partition> (OK | <exception class>)   ("-": cancel)
//       REASSIGNMENT <topic> <partition> <replicas> <adding> <removing>   (comma lists)

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaClientTool {
    private static final Object OUT_LOCK = new Object();

    private KafkaClientTool() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage("no command");
        }
        Map<String, String> opts = new HashMap<>();
        Properties extra = new Properties();
        List<String> positional = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--")) {
                if (i + 1 >= args.length) {
                    usage("missing value for " + a);
                }
                String v = args[++i];
                if (a.equals("--config")) {
                    int eq = v.indexOf('=');
                    if (eq <= 0) {
                        usage("--config wants key=value, got " + v);
                    }
                    extra.setProperty(v.substring(0, eq), v.substring(eq + 1));
                } else {
                    opts.put(a.substring(2), v);
                }
            } else {
                positional.add(a);
            }
        }
        int code;
        switch (args[0]) {
            case "produce": code = produce(opts, extra); break;
            case "consume": code = consume(opts, extra); break;
            case "copy": code = copy(opts, extra); break;
            case "admin": code = admin(opts, extra, positional); break;
            default: usage("unknown command " + args[0]); return;
        }
        System.out.flush();
        System.exit(code);
    }

    private static void usage(String why) {
        System.err.println("usage error: " + why);
        System.exit(2);
    }

    private static String need(Map<String, String> opts, String name) {
        String v = opts.get(name);
        if (v == null) {
            usage("--" + name + " is required");
        }
        return v;
    }

    private static void emit(String... fields) {
        String line = String.join("\t", fields);
        synchronized (OUT_LOCK) {
            System.out.println(line);
            System.out.flush();
        }
    }

    private static String hex(byte[] b) {
        if (b == null) {
            return "-";
        }
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return sb.length() == 0 ? "" : sb.toString();
    }

    private static String oneLine(Throwable t) {
        String m = String.valueOf(t.getMessage());
        return m.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
    }

    private static int produce(Map<String, String> opts, Properties extra) throws Exception {
        String topic = need(opts, "topic");
        int count = Integer.parseInt(need(opts, "count"));
        String keyPrefix = opts.getOrDefault("key-prefix", "key");
        int valueSize = Integer.parseInt(opts.getOrDefault("value-size", "0"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kafkapy-test-java-producer");
        if (opts.containsKey("acks")) {
            p.put(ProducerConfig.ACKS_CONFIG, opts.get("acks"));
        }
        if (opts.containsKey("idempotent")) {
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, opts.get("idempotent"));
        }
        if (opts.containsKey("compression")) {
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opts.get("compression"));
        }
        p.putAll(extra);
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        String transaction = opts.get("transaction");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (transaction != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            for (int i = 0; i < count; i++) {
                byte[] key = (keyPrefix + "-" + i).getBytes(StandardCharsets.UTF_8);
                StringBuilder value = new StringBuilder("value-").append(i).append('-');
                while (value.length() < valueSize) {
                    value.append('x');
                }
                final String keyHex = hex(key);
                producer.send(new ProducerRecord<>(topic, key, value.toString().getBytes(StandardCharsets.UTF_8)),
                    (md, e) -> {
                        if (e == null) {
                            acked.incrementAndGet();
                            emit("ACK", Integer.toString(md.partition()), Long.toString(md.offset()), keyHex);
                        } else {
                            failed.incrementAndGet();
                            emit("ERR", keyHex, e.getClass().getName(), oneLine(e));
                        }
                    });
            }
            producer.flush();
            if ("commit".equals(transaction)) {
                producer.commitTransaction();
            } else if ("abort".equals(transaction)) {
                producer.abortTransaction();
            }
        }
        emit("DONE", Integer.toString(acked.get()), Integer.toString(failed.get()));
        return failed.get() == 0 && acked.get() == count ? 0 : 1;
    }

    private static int consume(Map<String, String> opts, Properties extra) {
        String topic = need(opts, "topic");
        int count = Integer.parseInt(need(opts, "count"));
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-ms", "30000"));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, need(opts, "group"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafkapy-test-java-consumer");
        p.putAll(extra);
        int got = 0;
        boolean committed = false;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic));
            while (got < count && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    got++;
                    emit("REC", Integer.toString(r.partition()), Long.toString(r.offset()), hex(r.key()),
                         hex(r.value()), Long.toString(r.timestamp()));
                }
            }
            try {
                consumer.commitSync(Duration.ofSeconds(10));
                committed = true;
            } catch (RuntimeException e) {
                System.err.println("commitSync failed: " + e);
            }
        }
        emit("DONE", Integer.toString(got), Boolean.toString(committed));
        return got >= count && committed ? 0 : 1;
    }

    // Bounded retries of a transactional call that timed out (a request lost
    // with a bounced broker): the Java producer wants the same call repeated,
    // not another one, after a TimeoutException.
    private static final int TXN_CALL_TRIES = 10;

    private interface TxnCall {
        void run();
    }

    private static void retryOnTimeout(TxnCall call) {
        for (int attempt = 1; ; attempt++) {
            try {
                call.run();
                return;
            } catch (TimeoutException e) {
                if (attempt >= TXN_CALL_TRIES) {
                    throw e;
                }
            }
        }
    }

    private static long committedOrZero(KafkaConsumer<byte[], byte[]> consumer, TopicPartition tp) {
        for (int attempt = 1; ; attempt++) {
            try {
                OffsetAndMetadata om = consumer.committed(Collections.singleton(tp), Duration.ofSeconds(10)).get(tp);
                return om == null ? 0L : om.offset();
            } catch (TimeoutException e) {
                if (attempt >= TXN_CALL_TRIES) {
                    throw e;
                }
            }
        }
    }

    private static int copy(Map<String, String> opts, Properties extra) throws Exception {
        String input = need(opts, "input");
        String output = need(opts, "output");
        int partition = Integer.parseInt(need(opts, "partition"));
        String group = need(opts, "group");
        int txnSize = Integer.parseInt(opts.getOrDefault("transaction-size", "100"));
        long pauseMs = Long.parseLong(opts.getOrDefault("pause-ms", "0"));
        int abortEvery = Integer.parseInt(opts.getOrDefault("abort-every", "0"));
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-ms", "120000"));
        String bootstrap = need(opts, "bootstrap");

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(txnSize));
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafkapy-test-java-copier-consumer");
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, need(opts, "transactional-id"));
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "kafkapy-test-java-copier-producer");
        // Kafka's copier: small batches, so a transaction has several in flight per partition.
        pp.put(ProducerConfig.BATCH_SIZE_CONFIG, "512");
        pp.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        for (String k : extra.stringPropertyNames()) {  // --config: "consumer." prefix for the consumer
            if (k.startsWith("consumer.")) {
                cp.put(k.substring("consumer.".length()), extra.getProperty(k));
            } else {
                pp.put(k, extra.getProperty(k));
            }
        }

        final boolean[] released = {false};
        Thread stdinWatch = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // discard: only EOF matters
                }
            } catch (java.io.IOException e) {
                // treated as EOF
            }
            synchronized (released) {
                released[0] = true;
            }
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();

        TopicPartition in = new TopicPartition(input, partition);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        long copied = 0;
        int commits = 0;
        int aborts = 0;
        int transactions = 0;
        long position;
        long end;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            consumer.assign(Collections.singleton(in));
            end = consumer.endOffsets(Collections.singleton(in), Duration.ofSeconds(30)).get(in);
            position = committedOrZero(consumer, in);
            consumer.seek(in, position);
            producer.initTransactions();
            while (position < end && System.nanoTime() < deadline) {
                boolean pacing;
                synchronized (released) {
                    pacing = !released[0];
                }
                if (pacing && pauseMs > 0) {
                    Thread.sleep(pauseMs);
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                transactions++;
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        producer.send(new ProducerRecord<>(output, partition, r.key(), r.value()));
                    }
                    long next = consumer.position(in);
                    Map<TopicPartition, OffsetAndMetadata> offsets =
                        Collections.singletonMap(in, new OffsetAndMetadata(next));
                    retryOnTimeout(() -> producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata()));
                    if (abortEvery > 0 && transactions % abortEvery == 0) {
                        retryOnTimeout(producer::abortTransaction);
                        aborts++;
                        emit("ABORT", "planned", "-");
                        position = committedOrZero(consumer, in);
                        consumer.seek(in, position);
                        continue;
                    }
                    retryOnTimeout(producer::commitTransaction);
                    commits++;
                    copied += records.count();
                    position = next;
                    emit("TXN", Long.toString(position), Integer.toString(records.count()));
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                         | UnsupportedVersionException e) {
                    emit("FATAL", e.getClass().getName(), oneLine(e));
                    break;
                } catch (KafkaException e) {
                    emit("ABORT", e.getClass().getName(), oneLine(e));
                    aborts++;
                    retryOnTimeout(producer::abortTransaction);
                    position = committedOrZero(consumer, in);
                    consumer.seek(in, position);
                }
            }
        }
        emit("DONE", Long.toString(copied), Integer.toString(commits), Integer.toString(aborts),
             Long.toString(position), Long.toString(end));
        return position == end ? 0 : 1;
    }

    private static int admin(Map<String, String> opts, Properties extra, List<String> args) throws Exception {
        if (args.isEmpty()) {
            usage("admin wants create-topic, describe-cluster or describe-topic");
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "kafkapy-test-java-admin");
        p.putAll(extra);
        try (Admin admin = Admin.create(p)) {
            switch (args.get(0)) {
                case "create-topic": {
                    String name = args.get(1);
                    int partitions = Integer.parseInt(args.get(2));
                    admin.createTopics(Collections.singletonList(new NewTopic(name, partitions, (short) 1)))
                        .all().get(30, TimeUnit.SECONDS);
                    emit("TOPIC", name, Integer.toString(partitions));
                    return 0;
                }
                case "describe-cluster": {
                    DescribeClusterResult r = admin.describeCluster();
                    String id = r.clusterId().get(30, TimeUnit.SECONDS);
                    Node controller = r.controller().get(30, TimeUnit.SECONDS);
                    int nodes = r.nodes().get(30, TimeUnit.SECONDS).size();
                    emit("CLUSTER", String.valueOf(id), controller == null ? "-" : Integer.toString(controller.id()),
                         Integer.toString(nodes));
                    return 0;
                }
                case "describe-topic": {
                    String name = args.get(1);
                    TopicDescription d = admin.describeTopics(Collections.singletonList(name))
                        .allTopicNames().get(30, TimeUnit.SECONDS).get(name);
                    emit("TOPIC", name, Integer.toString(d.partitions().size()));
                    for (TopicPartitionInfo tp : d.partitions()) {
                        emit("PARTITION", name, Integer.toString(tp.partition()),
                             tp.leader() == null ? "-" : Integer.toString(tp.leader().id()),
                             ids(tp.replicas()), ids(tp.isr()));
                    }
                    return 0;
                }
                case "reassign": {
                    TopicPartition tp = new TopicPartition(args.get(1), Integer.parseInt(args.get(2)));
                    java.util.Optional<NewPartitionReassignment> target = args.get(3).equals("-")
                        ? java.util.Optional.empty()
                        : java.util.Optional.of(new NewPartitionReassignment(intList(args.get(3))));
                    String outcome = "OK";
                    try {
                        admin.alterPartitionReassignments(Collections.singletonMap(tp, target))
                            .all().get(30, TimeUnit.SECONDS);
                    } catch (java.util.concurrent.ExecutionException e) {
                        outcome = e.getCause().getClass().getSimpleName();
                    }
                    emit("REASSIGN", tp.topic(), Integer.toString(tp.partition()), outcome);
                    return 0;
                }
                case "list-reassignments": {
                    Map<TopicPartition, PartitionReassignment> all = admin.listPartitionReassignments()
                        .reassignments().get(30, TimeUnit.SECONDS);
                    for (Map.Entry<TopicPartition, PartitionReassignment> e : all.entrySet()) {
                        PartitionReassignment r = e.getValue();
                        emit("REASSIGNMENT", e.getKey().topic(), Integer.toString(e.getKey().partition()),
                             joined(r.replicas()), joined(r.addingReplicas()), joined(r.removingReplicas()));
                    }
                    return 0;
                }
                default:
                    usage("unknown admin command " + args.get(0));
                    return 2;
            }
        }
    }

    private static List<Integer> intList(String commaList) {
        List<Integer> out = new ArrayList<>();
        for (String s : commaList.split(",")) {
            out.add(Integer.parseInt(s.trim()));
        }
        return out;
    }

    private static String joined(List<Integer> ids) {
        StringBuilder sb = new StringBuilder();
        for (Integer id : ids) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(id);
        }
        return sb.toString();
    }

    private static String ids(List<Node> nodes) {
        StringBuilder sb = new StringBuilder();
        for (Node n : nodes) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(n.id());
        }
        return sb.toString();
    }
}
