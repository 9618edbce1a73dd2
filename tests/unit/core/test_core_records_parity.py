"""records.pyx vs records_py: BatchBuilder and decoding agree byte for byte."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy._core import batch_py
from support.twins import REQUIRE_EXTENSIONS, import_core  # noqa: F401


records_strategy = st.lists(
    st.tuples(
        st.integers(0, 1 << 41),
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=12,
)


def _build(mod, records, codec, batch_size, **kw):
    builder = mod.BatchBuilder(codec, batch_size)
    deltas = [builder.append(ts, key, value, headers) for ts, key, value, headers in records]
    return builder, deltas, builder.build(**kw)


@settings(max_examples=80, deadline=None)
@given(records=records_strategy, codec=st.sampled_from([0, 1, 2, 3, 4]), batch_size=st.integers(100, 5000))
def test_builders_agree(records, codec, batch_size):
    compiled, twin = import_core("records", "compiled"), import_core("records", "twin")
    b1, d1, out1 = _build(compiled, records, codec, batch_size, producer_id=7, producer_epoch=1, base_sequence=3)
    b2, d2, out2 = _build(twin, records, codec, batch_size, producer_id=7, producer_epoch=1, base_sequence=3)
    assert d1 == d2
    assert (b1.records_count, b1.size_bytes, b1.base_timestamp, b1.max_timestamp) == (
        b2.records_count, b2.size_bytes, b2.base_timestamp, b2.max_timestamp)
    if codec in (0, 1, 4):  # snappy/lz4 output is deterministic too, but keep to the codecs we are sure of
        assert out1 == out2
    accepted = [r for r, d in zip(records, d1) if d >= 0]
    headers, end, error = batch_py.scan_batches(out1)
    assert (end, error) == (len(out1), 0)
    assert (headers[0].producer_id, headers[0].producer_epoch, headers[0].base_sequence) == (7, 1, 3)
    expected = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(accepted)]
    assert compiled.decode_records(out1) == twin.decode_records(out1) == expected


def test_batch_size_bound(records_mod):
    builder = records_mod.BatchBuilder(0, 1000)
    deltas = [builder.append(1, None, b"x" * 100) for _ in range(20)]
    accepted = [d for d in deltas if d >= 0]
    assert accepted == list(range(len(accepted)))
    assert all(d == -1 for d in deltas[len(accepted):])
    assert builder.size_bytes <= 1000
    # An oversized first record is accepted alone.
    big = records_mod.BatchBuilder(0, 100)
    assert big.append(1, None, b"y" * 500) == 0
    assert big.append(1, None, b"y") == -1


def test_rejects_unknown_codec(records_mod):
    with pytest.raises(records_mod.UnsupportedCompressionError):
        records_mod.BatchBuilder(9)


class _Rec(tuple):
    def __new__(cls, *fields):
        return tuple.__new__(cls, fields)


@pytest.mark.parametrize("codec", [0, 1, 3, 4])
def test_consumer_decode_skips_below_fetch_offset(records_mod, codec):
    batch = records_mod.build_batch([(b"k%d" % i, b"v", [], 100 + i) for i in range(5)], base_offset=10,
                                    compression=codec)
    out = records_mod.decode_consumer_records(batch, "t", 3, 12, _Rec)
    assert [r[2] for r in out] == [12, 13, 14]
    assert out[0] == ("t", 3, 12, 102, 0, b"k2", b"v", [])


def test_consumer_decode_log_append_time(records_mod):
    batch = records_mod.build_batch([(None, b"a", [], 10), (None, b"b", [], 20)], timestamp_type=1)
    out = records_mod.decode_consumer_records(memoryview(batch), "t", 0, 0, _Rec)
    assert [(r[3], r[4]) for r in out] == [(20, 1), (20, 1)]


@settings(max_examples=150, deadline=None)
@given(tail=st.binary(max_size=80), count=st.integers(0, 4))
def test_garbage_raises_the_same(tail, count):
    import struct

    compiled, twin = import_core("records", "compiled"), import_core("records", "twin")
    header = bytearray(twin.build_batch([]))
    struct.pack_into(">i", header, 8, 49 + len(tail))
    struct.pack_into(">i", header, 57, count)
    data = bytes(header) + tail
    outcomes = []
    for mod in (compiled, twin):
        try:
            outcomes.append(("ok", mod.decode_records(data)))
        except twin.CorruptRecordError:
            outcomes.append(("corrupt", None))
    assert outcomes[0] == outcomes[1]
