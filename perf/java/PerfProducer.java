// Apache's Java producer (kafka-clients, unmodified) as a benchmark load:
// the reference client of perf/bench_transactions.py and perf/bench_security.py
// (--client java).  Compiled by tests/support/java_client.py like the tests'
// KafkaClientTool, run with the JIT's full tiers (no C1-only flag).
//
//   PerfProducer --bootstrap B --topic T --partition P --records N --size S
//                --mode idempotent | idem+flush-K | txn-K  [--warmup W]
//                [--config k=v]...
//
// Modes, as bench_transactions.py's confluent-kafka loop: ``idempotent``
// streams N records of S bytes and flushes once at the end; ``idem+flush-K``
// flushes after every K records; ``txn-K`` sends them in transactions of K
// records (beginTransaction, K sends, commitTransaction, which flushes and then
// ends the transaction).  Client defaults apply unless --config overrides them
// (kafka-clients 3.9: acks=all, enable.idempotence=true, linger.ms=0,
// batch.size=16384); ``txn-K`` sets transactional.id unless given.
//
// The run is in three steps so that the driver can time exactly the measured
// part and read the broker's CPU around it:
//   1. warm-up, untimed: W records in the same mode (the connection, metadata,
//      producer id, InitProducerId, and the JIT's compilation of the send
//      path), then the line  READY <pid>
//   2. wait for one line on stdin (the driver's "go"; end of input aborts);
//   3. the measured records, then
//        RESULT <records acknowledged> <errors> <elapsed s> <process CPU s>
//        COMMITS <commit or flush latency ms, comma-separated>   (may be empty)
//        FLUSHES <the flush part of each, ms>  (txn-K: flush() is called before
//                commitTransaction(), which then only sends EndTxn)
// Exit code 0 when every measured record was acknowledged, 1 otherwise,
// 2 for a usage error.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class PerfProducer {
    private final KafkaProducer<byte[], byte[]> producer;
    private final String topic;
    private final int partition;
    private final byte[] value;
    private final Integer txnSize;
    private final Integer flushEvery;
    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong errors = new AtomicLong();
    private final Callback callback = (metadata, exception) -> {
        if (exception == null) {
            acked.incrementAndGet();
        } else if (errors.getAndIncrement() == 0) {
            System.err.println("first send error: " + exception);
        }
    };

    private PerfProducer(Properties props, String topic, int partition, int size, String mode) {
        this.topic = topic;
        this.partition = partition;
        this.value = new byte[size];
        java.util.Arrays.fill(this.value, (byte) 'x');
        this.txnSize = mode.startsWith("txn-") ? Integer.valueOf(mode.substring(4)) : null;
        this.flushEvery = mode.startsWith("idem+flush-") ? Integer.valueOf(mode.substring(11)) : null;
        if (txnSize == null && flushEvery == null && !mode.equals("idempotent")) {
            usage("unknown mode " + mode);
        }
        if (txnSize != null) {
            props.putIfAbsent(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "perf-" + topic + "-" + partition);
        }
        this.producer = new KafkaProducer<>(props);
        if (txnSize != null) {
            producer.initTransactions();
        }
    }

    /** ``records`` records in this mode; the commit (or flush) latencies in ms
     * (the flush part of each in ``flushes``). */
    private List<Double> run(long records, List<Double> flushes) {
        List<Double> commits = new ArrayList<>();
        long sent = 0;
        while (sent < records) {
            long n = Math.min(txnSize != null ? txnSize : flushEvery != null ? flushEvery : records, records - sent);
            if (txnSize != null) {
                producer.beginTransaction();
            }
            for (long i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, partition, null, value), callback);
            }
            if (txnSize != null || flushEvery != null) {
                long t0 = System.nanoTime();
                producer.flush();
                long t1 = System.nanoTime();
                if (txnSize != null) {
                    producer.commitTransaction();
                }
                commits.add((System.nanoTime() - t0) / 1e6);
                flushes.add((t1 - t0) / 1e6);
            }
            sent += n;
        }
        producer.flush();
        return commits;
    }

    private static String joined(List<Double> values) {
        StringBuilder list = new StringBuilder();
        for (double v : values) {
            if (list.length() > 0) {
                list.append(',');
            }
            list.append(String.format("%.3f", v));
        }
        return list.toString();
    }

    private static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime() / 1e9;
    }

    private static void usage(String why) {
        System.err.println("usage error: " + why);
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        Properties props = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                usage("bad argument " + args[i]);
            }
            if (args[i].equals("--config")) {
                int eq = args[i + 1].indexOf('=');
                if (eq <= 0) {
                    usage("--config wants key=value");
                }
                props.setProperty(args[i + 1].substring(0, eq), args[i + 1].substring(eq + 1));
            } else {
                opts.put(args[i].substring(2), args[i + 1]);
            }
        }
        for (String name : new String[] {"bootstrap", "topic", "records", "size", "mode"}) {
            if (!opts.containsKey(name)) {
                usage("--" + name + " is required");
            }
        }
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "kafkapy-perf-java-producer");
        PerfProducer perf = new PerfProducer(props, opts.get("topic"),
            Integer.parseInt(opts.getOrDefault("partition", "0")), Integer.parseInt(opts.get("size")), opts.get("mode"));
        long records = Long.parseLong(opts.get("records"));
        perf.run(Long.parseLong(opts.getOrDefault("warmup", "0")), new ArrayList<>());
        long warmAcked = perf.acked.get();
        long warmErrors = perf.errors.get();
        System.out.println("READY\t" + ProcessHandle.current().pid());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (in.readLine() == null) {
            perf.producer.close();
            System.exit(1);
        }
        double cpu0 = cpuSeconds();
        long t0 = System.nanoTime();
        List<Double> flushes = new ArrayList<>();
        List<Double> commits = perf.run(records, flushes);
        double elapsed = (System.nanoTime() - t0) / 1e9;
        double cpu = cpuSeconds() - cpu0;
        long acked = perf.acked.get() - warmAcked;
        long errors = perf.errors.get() - warmErrors;
        System.out.println("RESULT\t" + acked + "\t" + errors + "\t" + elapsed + "\t" + cpu);
        System.out.println("COMMITS\t" + joined(commits));
        System.out.println("FLUSHES\t" + joined(flushes));
        System.out.flush();
        perf.producer.close();
        System.exit(acked == records && errors == 0 ? 0 : 1);
    }
}
