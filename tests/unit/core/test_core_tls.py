"""tls: many TLS records decrypted per call, compiled module and twin alike
(server SSLObject over memory BIOs, as the processor holds it)."""

import ssl

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.certs import make_certs
from support.tls_memory import memory_tls, tls_contexts
from support.twins import REQUIRE_EXTENSIONS, import_core  # noqa: F401


@pytest.fixture(scope="module")
def contexts(tmp_path_factory):
    return tls_contexts(make_certs(tmp_path_factory.mktemp("certs")))


@pytest.fixture(params=["compiled", "twin"])
def tls_mod(request):
    return import_core("tls", request.param)


def _connected(contexts, tls_mod):
    """(reader, client SSLObject, server incoming BIO, client outgoing BIO)."""
    tls = memory_tls(*contexts)
    return tls_mod.Reader(tls.server, tls.server_in), tls.client, tls.server_in, tls.client_out


def test_compiled_reader_is_used(contexts):
    if not REQUIRE_EXTENSIONS:
        pytest.skip("KAFKAPY_REQUIRE_EXTENSIONS is not 1")
    tls = import_core("tls", "compiled")
    reader, *_ = _connected(contexts, tls)
    # Not the twin's fallback: this interpreter's _ssl layout was confirmed.
    assert tls.AVAILABLE and type(reader).__name__ == "_Reader"


def test_small_records_are_read_whole_up_to_the_bytes_asked(contexts, tls_mod):
    reader, client, s_in, c_out = _connected(contexts, tls_mod)
    buf = bytearray(64 * 1024)
    assert reader.read_into(buf, 0, 100) == -1  # nothing waiting
    # librdkafka's pattern: a 10-byte record and a 1 KiB record per Kafka record.
    data = b"".join(bytes([i % 251]) * (10 if i % 2 else 1024) for i in range(60))
    pos = 0
    for i in range(60):
        size = 10 if i % 2 else 1024
        client.write(data[pos:pos + size])
        pos += size
    s_in.write(c_out.read())
    first = reader.read_into(buf, 5, 3000)  # several records, the last one cut
    assert first == 3000 and bytes(buf[5:3005]) == data[:3000]
    rest = reader.read_into(buf, 5 + first, len(buf) - 5 - first)
    assert first + rest == len(data) and bytes(buf[5:5 + len(data)]) == data
    assert reader.read_into(buf, 0, 100) == -1
    # Half a record: nothing until the rest arrives.
    client.write(b"z" * 5000)
    wire = c_out.read()
    s_in.write(wire[:2000])
    assert reader.read_into(buf, 0, len(buf)) == -1
    s_in.write(wire[2000:])
    assert reader.read_into(buf, 0, len(buf)) == 5000 and bytes(buf[:5000]) == b"z" * 5000


def test_close_notify_reads_zero(contexts, tls_mod):
    reader, client, s_in, c_out = _connected(contexts, tls_mod)
    client.write(b"last")
    with pytest.raises(ssl.SSLWantReadError):
        client.unwrap()  # close_notify sent, the server's awaited
    s_in.write(c_out.read())
    buf = bytearray(100)
    assert reader.read_into(buf, 0, 100) == 4 and bytes(buf[:4]) == b"last"
    assert reader.read_into(buf, 0, 100) == 0
    assert reader.read_into(buf, 0, 100) == 0


def test_a_forged_record_raises_after_the_plaintext_before_it(contexts, tls_mod):
    reader, client, s_in, c_out = _connected(contexts, tls_mod)
    client.write(b"a" * 100)
    good = c_out.read()
    client.write(b"b" * 100)
    forged = bytearray(c_out.read())
    forged[-3] ^= 1  # the AEAD tag no longer matches
    s_in.write(good + bytes(forged))
    buf = bytearray(1000)
    assert reader.read_into(buf, 0, 1000) == 100 and bytes(buf[:100]) == b"a" * 100
    for _ in range(2):  # and keeps raising: the connection is to be closed
        with pytest.raises(ssl.SSLError):
            reader.read_into(buf, 0, 1000)


def test_plaintext_bytes_instead_of_records_raise(contexts, tls_mod):
    reader, client, s_in, c_out = _connected(contexts, tls_mod)
    s_in.write(b"\x00\x00\x00\x10" + b"\x00" * 40)
    with pytest.raises(ssl.SSLError):
        reader.read_into(bytearray(100), 0, 100)


def test_a_range_outside_the_buffer_is_refused(contexts, tls_mod):
    reader, client, s_in, c_out = _connected(contexts, tls_mod)
    client.write(b"x" * 10)
    s_in.write(c_out.read())
    with pytest.raises((ValueError, IndexError)):
        reader.read_into(bytearray(8), 4, 8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.integers(1, 20000), min_size=1, max_size=12),
       wants=st.lists(st.integers(1, 40000), min_size=1, max_size=30),
       split=st.integers(0, 100))
def test_compiled_and_twin_agree(contexts, writes, wants, split):
    compiled = import_core("tls", "compiled")
    twin = import_core("tls", "twin")
    data = bytes(i % 253 for i in range(sum(writes)))
    answers = []
    for module in (compiled, twin):
        reader, client, s_in, c_out = _connected(contexts, module)
        pos = 0
        for size in writes:
            client.write(data[pos:pos + size])
            pos += size
        wire = c_out.read()
        cut = len(wire) * split // 100  # the ciphertext arrives in two pieces
        s_in.write(wire[:cut])
        buf, got, returned = bytearray(len(data) + 40000), 0, []
        for want in wants * 3:
            n = reader.read_into(buf, got, want)
            returned.append(n)
            if n < 0 and cut < len(wire):
                s_in.write(wire[cut:])
                cut = len(wire)
            got += max(n, 0)
        answers.append((returned, bytes(buf[:got])))
        assert data.startswith(answers[-1][1])
    assert answers[0] == answers[1]
