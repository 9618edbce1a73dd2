"""kafkapy._core.batch and its twin: header reads, scanning, offset assignment."""

import mmap
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy._core.records_py import build_batch, decode_records
from kafkapy._core.types import BatchHeader

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87

# Function-scoped fixtures are fine here: they return modules, no state.
PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=80),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
        st.integers(0, 1 << 42),
    ),
    min_size=1,
    max_size=4,
)

batch_strategy = st.fixed_dictionaries(
    {
        "records": records_strategy,
        "base_offset": st.integers(0, 1 << 40),
        "partition_leader_epoch": st.integers(-1, 1 << 20),
        "producer_id": st.integers(-1, 1 << 40),
        "producer_epoch": st.integers(-1, 32767),
        "base_sequence": st.integers(-1, 1 << 30),
        "compression": st.sampled_from([0, 1]),  # stdlib codecs: keeps examples fast
        "is_transactional": st.booleans(),
    }
)


def _build_log(batch_specs):
    """Concatenate batches; return (bytes, [(position, size, spec)])."""
    out = bytearray()
    layout = []
    for spec in batch_specs:
        batch = build_batch(**spec)
        layout.append((len(out), len(batch), spec))
        out += batch
    return bytes(out), layout


def _recrc(buf, position):
    """Rewrite the CRC of the batch at position (after a deliberate edit)."""
    (batch_length,) = struct.unpack_from(">i", buf, position + 8)
    crc = crc32c.crc32c(bytes(buf[position + 21 : position + 12 + batch_length]))
    struct.pack_into(">I", buf, position + 17, crc)


def _simple_batch(count=3, **kwargs):
    return build_batch([(b"k", b"value", [], 1000 + i) for i in range(count)], **kwargs)


# ---------------------------------------------------------------- constants and read_header


def test_constants(batch_mod):
    assert batch_mod.BATCH_HEADER_SIZE == 61
    assert batch_mod.LOG_OVERHEAD == 12


def test_read_header_fields(batch_mod):
    batch = build_batch(
        [(b"a", b"b", [], 5000), (None, b"c", [], 7000)],
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=99,
        producer_epoch=3,
        base_sequence=11,
        compression=1,
        is_transactional=True,
    )
    padded = b"xx" + batch
    header = batch_mod.read_header(padded, 2)
    assert type(header) is BatchHeader
    assert header.position == 2
    assert header.base_offset == 42
    assert header.batch_length == len(batch) - 12
    assert header.partition_leader_epoch == 7
    assert header.magic == 2
    assert header.crc == crc32c.crc32c(batch[21:])
    assert header.attributes == 0x10 | 1
    assert header.last_offset_delta == 1
    assert header.base_timestamp == 5000
    assert header.max_timestamp == 7000
    assert header.producer_id == 99
    assert header.producer_epoch == 3
    assert header.base_sequence == 11
    assert header.records_count == 2


def test_read_header_negative_fields(batch_mod):
    header = batch_mod.read_header(_simple_batch(), 0)
    assert header.partition_leader_epoch == -1
    assert header.producer_id == -1
    assert header.producer_epoch == -1
    assert header.base_sequence == -1


def test_read_header_needs_61_bytes(batch_mod):
    batch = _simple_batch()
    with pytest.raises(ValueError):
        batch_mod.read_header(batch[:60], 0)
    with pytest.raises(ValueError):
        batch_mod.read_header(batch, len(batch) - 60)
    with pytest.raises(ValueError):
        batch_mod.read_header(batch, -1)
    assert batch_mod.read_header(batch[:61], 0).records_count == 3


# ---------------------------------------------------------------- buffer kinds


def _as(kind, data):
    if kind == "bytes":
        return bytes(data)
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(bytearray(data))
    mapping = mmap.mmap(-1, len(data))
    mapping[:] = data
    return mapping


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap"])
def test_buffer_kinds(batch_mod, kind):
    data = _simple_batch() + _simple_batch(count=1)
    buf = _as(kind, data)
    headers, end_position, error_code = batch_mod.scan_batches(buf)
    assert (len(headers), end_position, error_code) == (2, len(data), 0)
    assert batch_mod.read_header(buf, headers[1].position) == headers[1]
    if kind == "bytes":
        with pytest.raises(TypeError):
            batch_mod.assign_offsets(buf, headers, 10, 1)
    else:
        assert batch_mod.assign_offsets(buf, headers, 10, 1, 123) == 14
        again, _, error_code = batch_mod.scan_batches(buf)
        assert error_code == 0
        assert [h.base_offset for h in again] == [10, 13]
    if kind == "mmap":
        # No export of the mapping may outlive a call, or close() raises BufferError.
        buf.close()


def test_empty_buffer(batch_mod):
    assert batch_mod.scan_batches(b"") == ([], 0, 0)
    assert batch_mod.scan_batches(bytearray(10), 10) == ([], 10, 0)
    assert batch_mod.assign_offsets(bytearray(), [], 5, 0) == 5


def test_scan_range_arguments(batch_mod):
    data = b"\x00" * 3 + _simple_batch() + b"\xff" * 5
    headers, end_position, error_code = batch_mod.scan_batches(data, 3, len(data) - 5)
    assert (len(headers), end_position, error_code) == (1, len(data) - 5, 0)
    assert headers[0].position == 3
    for position, end in [(-1, -1), (4, 3), (0, len(data) + 1)]:
        with pytest.raises(ValueError):
            batch_mod.scan_batches(data, position, end)


# ---------------------------------------------------------------- individual errors


def test_batch_length_below_minimum(batch_mod):
    data = bytearray(_simple_batch())
    struct.pack_into(">i", data, 8, 48)
    assert batch_mod.scan_batches(data) == ([], 0, CORRUPT_MESSAGE)
    struct.pack_into(">i", data, 8, -5)
    assert batch_mod.scan_batches(data) == ([], 0, CORRUPT_MESSAGE)


def test_bad_magic_is_invalid_record(batch_mod):
    first = _simple_batch()
    data = bytearray(first + _simple_batch())
    data[len(first) + 16] = 1  # magic is not CRC-covered
    headers, end_position, error_code = batch_mod.scan_batches(data)
    assert (len(headers), end_position, error_code) == (1, len(first), INVALID_RECORD)


def test_bad_crc(batch_mod):
    data = bytearray(_simple_batch())
    data[-1] ^= 0x01
    assert batch_mod.scan_batches(data) == ([], 0, CORRUPT_MESSAGE)
    headers, _, error_code = batch_mod.scan_batches(data, verify_crc=False)
    assert (len(headers), error_code) == (1, 0)


def test_unknown_codec(batch_mod):
    data = bytearray(_simple_batch())
    struct.pack_into(">h", data, 21, 5)
    _recrc(data, 0)
    assert batch_mod.scan_batches(data) == ([], 0, CORRUPT_MESSAGE)
    struct.pack_into(">h", data, 21, 4 | 0x08 | 0x10 | 0x20)
    _recrc(data, 0)
    assert batch_mod.scan_batches(data)[2] == 0


def test_offset_delta_count_mismatch(batch_mod):
    data = bytearray(_simple_batch(count=3))
    struct.pack_into(">i", data, 23, 3)  # lastOffsetDelta 3 with 3 records
    _recrc(data, 0)
    assert batch_mod.scan_batches(data) == ([], 0, INVALID_RECORD)
    struct.pack_into(">i", data, 23, 2)
    struct.pack_into(">i", data, 57, -1)  # negative recordsCount
    _recrc(data, 0)
    assert batch_mod.scan_batches(data) == ([], 0, INVALID_RECORD)


def test_empty_batch_keeps_its_offset_delta(batch_mod):
    # Compaction can leave a batch with no records that still spans offsets.
    data = bytearray(build_batch([]))
    struct.pack_into(">i", data, 23, 4)
    _recrc(data, 0)
    headers, _, error_code = batch_mod.scan_batches(data)
    assert error_code == 0 and headers[0].records_count == 0
    assert batch_mod.assign_offsets(data, headers, 10, 0) == 15
    struct.pack_into(">i", data, 23, -1)
    _recrc(data, 0)
    assert batch_mod.scan_batches(data)[2] == INVALID_RECORD


def test_max_batch_size(batch_mod):
    small = _simple_batch(count=1)
    large = _simple_batch(count=10)
    data = small + large
    assert batch_mod.scan_batches(data, max_batch_size=len(large))[2] == 0
    headers, end_position, error_code = batch_mod.scan_batches(data, max_batch_size=len(large) - 1)
    assert (len(headers), end_position, error_code) == (1, len(small), MESSAGE_TOO_LARGE)
    # As in Kafka, the size limit is checked before truncation.
    assert batch_mod.scan_batches(large[:30], max_batch_size=40) == ([], 0, MESSAGE_TOO_LARGE)


def test_assign_offsets_rejects_headers_outside_buffer(batch_mod):
    data = bytearray(_simple_batch())
    headers, _, _ = batch_mod.scan_batches(data)
    with pytest.raises(ValueError):
        batch_mod.assign_offsets(data[:-1], headers, 0, 0)
    with pytest.raises(ValueError):
        batch_mod.assign_offsets(data, [headers[0]._replace(position=1)], 0, 0)
    with pytest.raises(OverflowError):
        batch_mod.assign_offsets(data, headers, 1 << 63, 0)
    with pytest.raises(OverflowError):
        batch_mod.assign_offsets(data, headers, 0, 1 << 31)


# ---------------------------------------------------------------- properties


@PROPERTY
@given(specs=st.lists(batch_strategy, min_size=1, max_size=4))
def test_scan_finds_built_batches(batch_mod, specs):
    data, layout = _build_log(specs)
    headers, end_position, error_code = batch_mod.scan_batches(data)
    assert (end_position, error_code) == (len(data), 0)
    assert len(headers) == len(layout)
    for header, (position, size, spec) in zip(headers, layout):
        records = spec["records"]
        assert header.position == position
        assert header.batch_length + 12 == size
        assert header.base_offset == spec["base_offset"]
        assert header.partition_leader_epoch == spec["partition_leader_epoch"]
        assert header.magic == 2
        assert header.attributes & 7 == spec["compression"]
        assert bool(header.attributes & 0x10) == spec["is_transactional"]
        assert header.records_count == len(records)
        assert header.last_offset_delta == len(records) - 1
        assert header.base_timestamp == records[0][3]
        assert header.max_timestamp == max(r[3] for r in records)
        assert header.producer_id == spec["producer_id"]
        assert header.producer_epoch == spec["producer_epoch"]
        assert header.base_sequence == spec["base_sequence"]
        assert header == batch_mod.read_header(data, position)


@PROPERTY
@given(
    specs=st.lists(batch_strategy, min_size=1, max_size=4),
    base_offset=st.integers(0, 1 << 50),
    leader_epoch=st.integers(0, (1 << 31) - 1),
    log_append_time_ms=st.sampled_from([-1]) | st.integers(0, 1 << 42),
)
def test_assign_offsets(batch_mod, specs, base_offset, leader_epoch, log_append_time_ms):
    data, layout = _build_log(specs)
    buf = bytearray(data)
    headers, _, _ = batch_mod.scan_batches(buf)
    next_offset = batch_mod.assign_offsets(buf, headers, base_offset, leader_epoch, log_append_time_ms)
    total_records = sum(len(spec["records"]) for spec in specs)
    assert next_offset == base_offset + total_records

    rescanned, end_position, error_code = batch_mod.scan_batches(buf)  # CRCs verified
    assert (end_position, error_code) == (len(buf), 0)
    expected_offset = base_offset
    for before, after, (position, size, spec) in zip(headers, rescanned, layout):
        assert after.base_offset == expected_offset
        assert after.partition_leader_epoch == leader_epoch
        records = decode_records(bytes(buf[position : position + size]))
        assert [r[0] for r in records] == list(range(expected_offset, expected_offset + len(records)))
        if log_append_time_ms >= 0:
            assert after.attributes == before.attributes | 0x08
            assert after.max_timestamp == log_append_time_ms
            assert {r[1] for r in records} == {log_append_time_ms}
        else:
            assert after.attributes == before.attributes
            assert after.max_timestamp == before.max_timestamp
            assert after.crc == before.crc
            assert [r[1] for r in records] == [r[3] for r in spec["records"]]
        # Nothing but the assigned fields changed.
        assert after._replace(base_offset=0, partition_leader_epoch=0, attributes=0, crc=0, max_timestamp=0) == (
            before._replace(base_offset=0, partition_leader_epoch=0, attributes=0, crc=0, max_timestamp=0)
        )
        expected_offset += len(spec["records"])


@PROPERTY
@given(specs=st.lists(batch_strategy, min_size=1, max_size=3), data=st.data())
def test_corrupting_any_covered_byte_is_detected(batch_mod, specs, data):
    log, layout = _build_log(specs)
    victim = data.draw(st.integers(0, len(layout) - 1))
    position, size, _ = layout[victim]
    at = data.draw(st.integers(position + 21, position + size - 1))
    flip = data.draw(st.integers(1, 255))
    buf = bytearray(log)
    buf[at] ^= flip
    headers, end_position, error_code = batch_mod.scan_batches(buf)
    assert (len(headers), end_position, error_code) == (victim, position, CORRUPT_MESSAGE)


def test_corrupting_every_covered_byte_of_one_batch(batch_mod):
    batch = build_batch([(b"key", b"v" * 40, [("h", b"1")], 10), (None, None, [], 11)], compression=1)
    for at in range(21, len(batch)):
        buf = bytearray(batch)
        buf[at] ^= 0x40
        assert batch_mod.scan_batches(buf) == ([], 0, CORRUPT_MESSAGE), at


@PROPERTY
@given(specs=st.lists(batch_strategy, min_size=1, max_size=3))
def test_truncation_at_every_length(batch_mod, specs):
    log, layout = _build_log(specs)
    boundaries = [position for position, _, _ in layout] + [len(log)]
    for length in range(len(log) + 1):
        whole = [b for b in boundaries if b <= length]
        last_whole = whole[-1]
        expected = (len(whole) - 1, last_whole, 0 if last_whole == length else CORRUPT_MESSAGE)
        headers, end_position, error_code = batch_mod.scan_batches(log[:length])
        assert (len(headers), end_position, error_code) == expected, length
        headers, end_position, error_code = batch_mod.scan_batches(log, 0, length)
        assert (len(headers), end_position, error_code) == expected, length


# ---------------------------------------------------------------- compiled and twin agree


def _outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as exc:  # the type is what must agree
        return ("raised", type(exc).__name__)


def _agree_on(compiled, twin, buf, position, end, verify_crc, max_batch_size):
    result = _outcome(compiled.scan_batches, buf, position, end, verify_crc, max_batch_size)
    assert result == _outcome(twin.scan_batches, buf, position, end, verify_crc, max_batch_size)
    assert _outcome(compiled.read_header, buf, position) == _outcome(twin.read_header, buf, position)
    if result[0] == "ok":
        headers = result[1][0]
        for log_append_time_ms in (-1, 77):
            mine, theirs = bytearray(buf), bytearray(buf)
            first = _outcome(compiled.assign_offsets, mine, headers, 5, 9, log_append_time_ms)
            second = _outcome(twin.assign_offsets, theirs, headers, 5, 9, log_append_time_ms)
            assert first == second
            assert mine == theirs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    buf=st.binary(max_size=300),
    position=st.integers(-2, 310),
    end=st.integers(-2, 310),
    verify_crc=st.booleans(),
    max_batch_size=st.integers(-1, 400),
)
def test_agree_on_garbage(both_batch_mods, buf, position, end, verify_crc, max_batch_size):
    _agree_on(*both_batch_mods, buf, position, end, verify_crc, max_batch_size)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    specs=st.lists(batch_strategy, min_size=1, max_size=3),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    fix_crc=st.booleans(),
    cut=st.integers(0, 10_000),
    verify_crc=st.booleans(),
    max_batch_size=st.sampled_from([-1, 61, 200, 1000]),
)
def test_agree_on_damaged_batches(both_batch_mods, specs, edits, fix_crc, cut, verify_crc, max_batch_size):
    log, layout = _build_log(specs)
    buf = bytearray(log)
    for at, value in edits:
        buf[at % len(buf)] = value
    if fix_crc:
        for position, _, _ in layout:
            try:
                _recrc(buf, position)
            except (struct.error, ValueError):
                pass
    buf = bytes(buf[: cut % (len(buf) + 1)])
    _agree_on(*both_batch_mods, buf, 0, -1, verify_crc, max_batch_size)
