"""Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), plain Python.

The Java producer picks a keyed record's partition as
``toPositive(murmur2(key_bytes)) % num_partitions`` with ``toPositive(n) =
n & 0x7fffffff``; reproducing it bit for bit is what lets a kafkapy producer
and a Java/librdkafka (``murmur2_random``) producer put the same key on the
same partition.  The compiled twin is ``murmur2.pyx``.

Algorithm: seed 0x9747b28c, m = 0x5bd1e995, r = 24; h = seed ^ len; each
4-byte little-endian word k: k *= m; k ^= k >>> 24; k *= m; h *= m; h ^= k;
then the 1-3 tail bytes are xor-ed in little-endian order and h *= m; finally
h ^= h >>> 13; h *= m; h ^= h >>> 15 — all arithmetic modulo 2**32.
"""

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data) -> int:
    """Java's ``Utils.murmur2(data)``: a signed 32-bit int."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    full = length & ~3
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[full + 2] << 16
    if tail >= 2:
        h ^= data[full + 1] << 8
    if tail >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return value & 0x7FFFFFFF


def partition_for_key(key, num_partitions: int) -> int:
    """The Java DefaultPartitioner's choice for a non-null serialized key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
