"""The log cleaner's offset map, in plain Python (twin of ``offset_map``).

Kafka's SkimpyOffsetMap: for each record key, by its 16-byte MD5 digest, the
last offset the cleaner saw for it. Its memory is ``memory_bytes`` (the
cleaner's share of ``log.cleaner.dedupe.buffer.size``) at 24 bytes a slot (a
digest and an 8-byte offset), filled to ``load_factor``
(``log.cleaner.io.buffer.load.factor``): ``capacity`` distinct keys at most;
``put`` of one more raises ``OverflowError`` (the cleaner checks ``len``
against ``capacity`` before each batch and ends its range there). ``get``
answers -1 for a digest never put. Digests are ``bytes``.

The compiled module keeps the slots in one table, as Kafka does; this twin
keeps a dict with the same capacity (several times the memory a key: it is
the fallback when the extension is not built). Owned by one cleaner pass.
"""

ENTRY_BYTES = 24  # a 16-byte digest and an 8-byte offset, as Kafka's SkimpyOffsetMap


def slots_and_capacity(memory_bytes: int, load_factor: float) -> tuple[int, int]:
    """The slots ``memory_bytes`` holds and the distinct keys ``load_factor`` lets in."""
    slots = max(1, int(memory_bytes) // ENTRY_BYTES)
    return slots, min(slots, max(1, int(slots * load_factor)))


class OffsetMap:
    __slots__ = ("capacity", "_offsets")

    def __init__(self, memory_bytes: int, load_factor: float):
        self.capacity = slots_and_capacity(memory_bytes, load_factor)[1]
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, digest: bytes, offset: int) -> None:
        if len(digest) != 16:
            raise ValueError(f"a digest is 16 bytes, not {len(digest)}")
        offsets = self._offsets
        if digest not in offsets and len(offsets) >= self.capacity:
            raise OverflowError(f"the offset map is full ({self.capacity} keys)")
        offsets[digest] = offset

    def get(self, digest: bytes) -> int:
        return self._offsets.get(digest, -1)
