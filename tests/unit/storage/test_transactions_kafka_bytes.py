"""The transaction formats against Apache Kafka's own code (kafka-clients 3.9,
the jar the Java-client tests use): the marker batch is byte-for-byte
``MemoryRecords.withEndTransactionMarker``, a segment holding markers reads
back through ``FileRecords`` (CRCs valid, ``EndTransactionMarker.deserialize``),
and the ``__transaction_state`` key and values are the bytes Kafka's type
system writes for TransactionLogKey v0 / TransactionLogValue v0 and v1."""

import hashlib
import os
import subprocess

import pytest

from kafkapy.protocol.transaction_log import TxnLogValue, encode_key, encode_value
from kafkapy.storage.config import LogConfig
from kafkapy.storage.control_records import build_end_txn_marker_batch
from kafkapy.storage.log import Log
from kafkapy.storage.shared import LocalPartitionState
from kafkapy._core.records_py import build_batch
from support.java_client import CACHE_ROOT, JAVA, JAVAC, java_client_missing, kafka_client_jars

pytestmark = pytest.mark.skipif(java_client_missing() is not None and not os.environ.get("CI"),
                                reason=str(java_client_missing()))

T0 = 1_700_000_000_000

SOURCE = r"""
import java.io.File;
import java.nio.ByteBuffer;
import java.util.TreeMap;
import org.apache.kafka.common.record.*;
import org.apache.kafka.common.protocol.types.*;

public class TxnFormats {
    static String hex(ByteBuffer b) {
        StringBuilder s = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) s.append(String.format("%02x", d.get()));
        return s.toString();
    }

    static Schema partitions(boolean flexible) {
        return flexible
            ? new Schema(new Field("topic", Type.COMPACT_STRING, ""),
                         new Field("partition_ids", new CompactArrayOf(Type.INT32), ""),
                         Field.TaggedFieldsSection.of())
            : new Schema(new Field("topic", Type.STRING, ""),
                         new Field("partition_ids", new ArrayOf(Type.INT32), ""));
    }

    static String value(boolean flexible, byte status, Object[][] topics) {
        Schema p = partitions(flexible);
        Field parts = flexible ? new Field("transaction_partitions", CompactArrayOf.nullable(p), "")
                               : new Field("transaction_partitions", ArrayOf.nullable(p), "");
        Schema v = flexible
            ? new Schema(new Field("producer_id", Type.INT64, ""), new Field("producer_epoch", Type.INT16, ""),
                         new Field("transaction_timeout_ms", Type.INT32, ""),
                         new Field("transaction_status", Type.INT8, ""), parts,
                         new Field("transaction_last_update_timestamp_ms", Type.INT64, ""),
                         new Field("transaction_start_timestamp_ms", Type.INT64, ""),
                         Field.TaggedFieldsSection.of())
            : new Schema(new Field("producer_id", Type.INT64, ""), new Field("producer_epoch", Type.INT16, ""),
                         new Field("transaction_timeout_ms", Type.INT32, ""),
                         new Field("transaction_status", Type.INT8, ""), parts,
                         new Field("transaction_last_update_timestamp_ms", Type.INT64, ""),
                         new Field("transaction_start_timestamp_ms", Type.INT64, ""));
        Struct s = new Struct(v);
        s.set("producer_id", 1000L);
        s.set("producer_epoch", (short) 3);
        s.set("transaction_timeout_ms", 60000);
        s.set("transaction_status", status);
        Object[] structs = null;
        if (topics != null) {
            structs = new Object[topics.length];
            for (int i = 0; i < topics.length; i++) {
                Struct t = new Struct(p);
                t.set("topic", topics[i][0]);
                t.set("partition_ids", topics[i][1]);
                if (flexible) t.set("_tagged_fields", new TreeMap<Integer, Object>());
                structs[i] = t;
            }
        }
        s.set("transaction_partitions", structs);
        s.set("transaction_last_update_timestamp_ms", 1700000000123L);
        s.set("transaction_start_timestamp_ms", 1700000000000L);
        if (flexible) s.set("_tagged_fields", new TreeMap<Integer, Object>());
        ByteBuffer b = ByteBuffer.allocate(2 + s.sizeOf());
        b.putShort((short) (flexible ? 1 : 0));
        s.writeTo(b);
        b.flip();
        return hex(b);
    }

    public static void main(String[] args) throws Exception {
        System.out.println("marker " + hex(MemoryRecords.withEndTransactionMarker(10L, 1700000000000L, 4, 5L,
            (short) 2, new EndTransactionMarker(ControlRecordType.COMMIT, 9)).buffer()));
        System.out.println("abort " + hex(MemoryRecords.withEndTransactionMarker(0L, 1700000000000L, -1, 5L,
            (short) 2, new EndTransactionMarker(ControlRecordType.ABORT, 0)).buffer()));
        Schema key = new Schema(new Field("transactional_id", Type.STRING, ""));
        Struct k = new Struct(key);
        k.set("transactional_id", "txn-1");
        ByteBuffer kb = ByteBuffer.allocate(2 + k.sizeOf());
        kb.putShort((short) 0);
        k.writeTo(kb);
        kb.flip();
        System.out.println("key " + hex(kb));
        Object[][] topics = {{"a", new Object[]{1, 7}}, {"b", new Object[]{2}}};
        System.out.println("v0 " + value(false, (byte) 1, topics));
        System.out.println("v1 " + value(true, (byte) 1, topics));
        System.out.println("v0empty " + value(false, (byte) 0, null));
        System.out.println("v1empty " + value(true, (byte) 0, null));
        for (FileLogInputStream.FileChannelRecordBatch batch : FileRecords.open(new File(args[0])).batches()) {
            batch.ensureValid();
            StringBuilder line = new StringBuilder("batch " + batch.baseOffset() + " " + batch.isControlBatch()
                + " " + batch.isTransactional() + " " + batch.producerId() + " " + batch.producerEpoch());
            if (batch.isControlBatch()) {
                for (org.apache.kafka.common.record.Record r : batch) {
                    EndTransactionMarker m = EndTransactionMarker.deserialize(r);
                    line.append(" " + m.controlType() + " " + m.coordinatorEpoch());
                }
            }
            System.out.println(line);
        }
    }
}
"""


@pytest.fixture(scope="module")
def java_output(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("txn")
    # The log's clock near the batch's timestamp: no time-based roll, one segment.
    log = Log.open(str(tmp / "t-0"), "t", 0, LogConfig(), LocalPartitionState(), None, lambda: T0 + 1000,
                   fsync=lambda fd: None)
    data = build_batch([(b"k", b"v", [], T0)], producer_id=5, producer_epoch=2, base_sequence=0,
                       is_transactional=True)
    with log.lock():
        log.append_as_follower(memoryview(bytearray(data)))
        log.append_control_batch(5, 2, 9, False, 0)
        log.append_control_batch(6, 0, 9, True, 0)
    segment = tmp / "t-0" / "00000000000000000000.log"
    log.close()

    jars = kafka_client_jars()
    classpath = os.pathsep.join(str(p) for p in jars.values())
    build = CACHE_ROOT / ("txn-formats-" + hashlib.sha256(
        (SOURCE + str(jars["kafka-clients.jar"].stat().st_size)).encode()).hexdigest()[:16])
    if not (build / "TxnFormats.class").exists():
        build.mkdir(parents=True, exist_ok=True)
        (build / "TxnFormats.java").write_text(SOURCE)
        subprocess.run([JAVAC, "-cp", classpath, "-d", str(build), str(build / "TxnFormats.java")],
                       check=True, timeout=120, capture_output=True)
    done = subprocess.run([JAVA, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp",
                           classpath + os.pathsep + str(build), "TxnFormats", str(segment)],
                          check=True, timeout=60, capture_output=True, text=True)
    out = {}
    for line in done.stdout.splitlines():
        name, _, rest = line.partition(" ")
        out.setdefault(name, []).append(rest)
    return out


def test_marker_batches_are_kafkas_bytes(java_output):
    assert build_end_txn_marker_batch(5, 2, 9, True, T0, base_offset=10, partition_leader_epoch=4).hex() == \
        java_output["marker"][0]
    assert build_end_txn_marker_batch(5, 2, 0, False, T0).hex() == java_output["abort"][0]


def test_kafka_reads_a_segment_with_markers(java_output):
    assert java_output["batch"] == ["0 false true 5 2", "1 true true 5 2 ABORT 9", "2 true true 6 0 COMMIT 9"]


def test_transaction_log_records_are_kafkas_bytes(java_output):
    assert encode_key("txn-1").hex() == java_output["key"][0]
    ongoing = TxnLogValue(1000, 3, 60000, 1, frozenset({("a", 1), ("a", 7), ("b", 2)}), 1700000000123,
                          1700000000000)
    empty = TxnLogValue(1000, 3, 60000, 0, frozenset(), 1700000000123, 1700000000000)
    assert encode_value(ongoing, 0).hex() == java_output["v0"][0]
    assert encode_value(ongoing, 1).hex() == java_output["v1"][0]
    assert encode_value(empty, 0).hex() == java_output["v0empty"][0]
    assert encode_value(empty, 1).hex() == java_output["v1empty"][0]
