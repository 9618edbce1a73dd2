"""kafkapy-dump-log on hand-built segment files (no broker needed)."""

from __future__ import annotations

import struct

import pytest

from kafkapy._core.records_py import COMPRESSION_GZIP, build_batch
from kafkapy.tools import dump_log

BASE = 100


def _segment(tmp_path, compression=0):
    """Three batches at offsets 100-101, 102, 103-105 and matching indexes."""
    batches = [
        build_batch([(b"k1", b"v1", [("h", b"x")], 1000), (None, b"v2", [], 1001)], base_offset=100,
                    partition_leader_epoch=0, compression=compression),
        build_batch([(b"k3", None, [], 1005)], base_offset=102, partition_leader_epoch=0,
                    producer_id=7, producer_epoch=0, base_sequence=10),
        build_batch([(None, b"p%d" % i, [], 1010 + i) for i in range(3)], base_offset=103,
                    partition_leader_epoch=1, compression=compression),
    ]
    log = tmp_path / f"{BASE:020d}.log"
    log.write_bytes(b"".join(batches))
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    index = tmp_path / f"{BASE:020d}.index"
    # Entries at the last offset of batches 1 and 3, then zero preallocation.
    index.write_bytes(struct.pack(">ii", 1, positions[0]) + struct.pack(">ii", 5, positions[2]) + b"\0" * 64)
    timeindex = tmp_path / f"{BASE:020d}.timeindex"
    timeindex.write_bytes(struct.pack(">qi", 1001, 1) + struct.pack(">qi", 1012, 5) + b"\0" * 48)
    return log, index, timeindex, batches, positions


def _run(capsys, *argv):
    code = dump_log.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_shallow_log_dump(tmp_path, capsys):
    log, _, _, batches, positions = _segment(tmp_path)
    code, out, err = _run(capsys, "--files", str(log))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {log}"
    assert lines[1] == "Log starting offset: 100"
    assert len(lines) == 5
    assert lines[2].startswith("baseOffset: 100 lastOffset: 101 count: 2 baseSequence: -1 lastSequence: -1 "
                               "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
                               "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1001 "
                               f"size: {len(batches[0])} magic: 2 compresscodec: none crc: ")
    assert lines[2].endswith(" isvalid: true")
    assert "baseSequence: 10 lastSequence: 10 producerId: 7 producerEpoch: 0" in lines[3]
    assert f"position: {positions[1]} " in lines[3]
    assert "partitionLeaderEpoch: 1" in lines[4] and "count: 3" in lines[4]


def test_print_data_log(tmp_path, capsys):
    log, *_ = _segment(tmp_path, compression=COMPRESSION_GZIP)
    code, out, err = _run(capsys, "--files", str(log), "--print-data-log")
    assert code == 0, err
    lines = out.splitlines()
    assert "compresscodec: gzip" in lines[2]
    assert lines[3] == ("| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h]"
                        " key: k1 payload: v1")
    assert lines[4] == "| offset: 101 CreateTime: 1001 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: v2"
    assert lines[6] == "| offset: 102 CreateTime: 1005 keySize: 2 valueSize: -1 sequence: 10 headerKeys: [] key: k3"
    assert lines[-1].startswith("| offset: 105 CreateTime: 1012")
    assert lines[-1].endswith("payload: p2")


def test_deep_iteration_without_data(tmp_path, capsys):
    log, *_ = _segment(tmp_path)
    code, out, _ = _run(capsys, "--files", str(log), "--deep-iteration")
    assert code == 0
    assert "| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h]" in out.splitlines()
    assert "payload" not in out


def test_trailing_bytes_and_bad_crc(tmp_path, capsys):
    log, *_ = _segment(tmp_path)
    data = bytearray(log.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: CRC no longer matches
    log.write_bytes(bytes(data) + b"\0\0\0\0\0\0\0\0\0\0\0\x50" + b"x" * 10)  # torn tail
    code, out, _ = _run(capsys, "--files", str(log))
    assert code == 0
    lines = out.splitlines()
    assert lines[2].endswith("isvalid: false")
    assert lines[3].endswith("isvalid: true")
    assert lines[-1] == f"Found 22 invalid bytes at the end of {log.name}"


def test_offset_index_dump_and_verify(tmp_path, capsys):
    _, index, _, _, positions = _segment(tmp_path)
    code, out, err = _run(capsys, "--files", str(index))
    assert code == 0
    assert out.splitlines() == [f"Dumping {index}", "offset: 101 position: 0", f"offset: 105 position: {positions[2]}"]
    assert err == ""


def test_offset_index_mismatch_reported(tmp_path, capsys):
    _, index, _, _, positions = _segment(tmp_path)
    # The entry for offset 103 points at the batch ending at 102.
    index.write_bytes(struct.pack(">ii", 3, positions[1]))
    code, out, err = _run(capsys, "--files", str(index), "--verify-index-only")
    assert code == 0
    assert out.splitlines() == [f"Dumping {index}"]
    assert err.splitlines() == [f"Mismatches in :{index}", "  Index offset: 103, log offset: 102"]


def test_time_index_dump_and_errors(tmp_path, capsys):
    _, _, timeindex, _, _ = _segment(tmp_path)
    code, out, err = _run(capsys, "--files", str(timeindex))
    assert code == 0
    assert out.splitlines()[1:] == ["timestamp: 1001 offset: 101", "timestamp: 1012 offset: 105"]
    assert err == ""
    timeindex.write_bytes(struct.pack(">qi", 1001, 1) + struct.pack(">qi", 999, 5) + struct.pack(">qi", 1200, 4))
    code, out, err = _run(capsys, "--files", str(timeindex))
    assert f"Found timestamp mismatch in :{timeindex}" in err
    assert "  Index timestamp: 999, log timestamp: 1012" in err
    assert "  Index timestamp: 999, Previously indexed timestamp: 1001" in err
    assert "Indexed offset: 104, found log offset: 105" in err


def test_index_sanity_check(tmp_path, capsys):
    _, index, timeindex, _, _ = _segment(tmp_path)
    code, out, _ = _run(capsys, "--files", f"{index},{timeindex}", "--index-sanity-check")
    assert code == 0
    assert f"{index} passed sanity check." in out and f"{timeindex} passed sanity check." in out
    index.write_bytes(struct.pack(">ii", 1, 0) + b"\0\0\0")
    code, _, err = _run(capsys, "--files", str(index), "--index-sanity-check")
    assert code == 1
    assert err.strip().endswith("found 11 bytes which is neither positive nor a multiple of 8.")
    assert "Traceback" not in err


def test_empty_index_and_unknown_file(tmp_path, capsys):
    empty = tmp_path / f"{0:020d}.index"
    empty.write_bytes(b"")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    code, out, err = _run(capsys, "--files", f"{empty},{other}")
    assert code == 0
    assert f"{empty} is empty." in out
    assert f"Ignoring unknown file {other}" in err


def test_control_batch(tmp_path, capsys):
    marker = build_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 4), [], 2000)], base_offset=0,
                         producer_id=9, producer_epoch=1, is_transactional=True, is_control=True)
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(marker)
    code, out, _ = _run(capsys, "--files", str(log), "--print-data-log")
    assert code == 0
    assert "isTransactional: true isControl: true" in out
    assert "| offset: 0 CreateTime: 2000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] " \
           "endTxnMarker: COMMIT coordinatorEpoch: 4" in out.splitlines()
    assert "payload" not in out


@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: --files"),
    (["--files", "/nonexistent/00000000000000000000.log"], "No such file or directory"),
])
def test_errors_are_one_line(argv, message, capsys):
    code, _, err = _run(capsys, *argv)
    assert code == 1
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_transaction_log_decoder(tmp_path, capsys):
    """--transaction-log-decoder prints __transaction_state records as Kafka's
    TransactionLog.formatRecordKeyAndValue: an Ongoing value, a tombstone
    (<DELETE>) and a key version it does not know (no payload)."""
    from kafkapy.protocol.transaction_log import TxnLogValue, encode_key, encode_value
    ongoing = TxnLogValue(42, 3, 60000, 1, frozenset({("b", 1), ("a", 0)}), 1_700_000_000_123, 1_700_000_000_000)
    batch = build_batch([(encode_key("tx-1"), encode_value(ongoing), [], 1000),
                         (encode_key("tx-1"), None, [], 1001),
                         (struct.pack(">h", 9) + b"junk", b"x", [], 1002)], base_offset=0)
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(batch)
    code, out, err = _run(capsys, "--files", str(log), "--transaction-log-decoder")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[-3].endswith(" key: transaction_metadata::transactionalId=tx-1 payload: producerId:42,"
                              "producerEpoch:3,state=Ongoing,partitions=[a-0,b-1],"
                              "txnLastUpdateTimestamp=1700000000123,txnTimeoutMs=60000")
    assert lines[-2].endswith(" key: transaction_metadata::transactionalId=tx-1 payload: <DELETE>")
    assert lines[-1].endswith(" key: unknown::version=9")
