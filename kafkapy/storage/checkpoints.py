"""Kafka's small text files, read and written byte-for-byte as Kafka does.

* offset checkpoints (``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``)::

      0\\n<count>\\n<topic> <partition> <offset>\\n...

* ``leader-epoch-checkpoint`` (per partition)::

      0\\n<count>\\n<epoch> <start_offset>\\n...

* ``partition.metadata`` (per partition): ``version: 0\\ntopic_id: <id>``
  where the id is the 16-byte topic id in base64url without padding (Kafka's
  ``Uuid.toString``); Kafka writes no trailing newline.
* ``meta.properties`` (per log dir): a java.util.Properties file with
  ``version=0``, ``broker.id``, ``cluster.id``.
* ``.kafka_cleanshutdown`` (per log dir): an empty marker file.

Every write goes to ``<name>.tmp``, is fsynced, renamed over the target, and
the directory is fsynced: a crash leaves either the old or the new file, never
a torn one (Kafka's ``CheckpointFile``/``AtomicMoveUtils`` do the same).
These functions hold no state; callers serialise writers (the partition lock
for per-partition files, the LogManager for per-dir files).
"""

import base64
import os
import time

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"


class CheckpointError(ValueError):
    """A checkpoint file exists but is malformed."""


def fsync_if_exists(path: str, fsync=os.fsync) -> None:
    """``fsync`` the file at ``path`` if there is one (an index a segment may lack)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_syncfs = None


def sync_filesystem(path: str) -> None:
    """Make every file of the filesystem holding ``path`` durable with one syncfs(2).

    Why: flushing n partitions one by one costs about 4n fsyncs (segment,
    two indexes, directory); at 10,000 partitions that was 50 s of shutdown
    on this machine class, past the shutdown timeout.  syncfs waits until the
    whole filesystem's dirty data is on disk (and issues the device cache
    flush), so it gives every file the guarantee its own fsync would.  Falls
    back to sync(2) where libc has no syncfs.
    """
    global _syncfs
    if _syncfs is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _syncfs = libc.syncfs
            _syncfs.argtypes = [ctypes.c_int]
        except (OSError, AttributeError):
            _syncfs = False
    if not _syncfs:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({path}) failed: {os.strerror(err)}")
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, fsync: bool = True) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        return None


def _parse_entries(path: str, text: str, fields_per_line: int) -> list[list[str]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version/count lines")
    try:
        version = int(lines[0])
        count = int(lines[1])
    except ValueError as e:
        raise CheckpointError(f"{path}: bad header: {e}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unsupported version {version}")
    entries = [line.split(" ") for line in lines[2:]]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    for e in entries:
        if len(e) != fields_per_line:
            raise CheckpointError(f"{path}: malformed line {' '.join(e)!r}")
    return entries


# ---- offset checkpoints: {(topic, partition): offset} ----

def format_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int], fsync: bool = True) -> None:
    write_atomic(path, format_offset_checkpoint(offsets), fsync)


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Missing file -> {} (Kafka treats it as empty)."""
    text = _read_text(path)
    if text is None:
        return {}
    result = {}
    for entry in _parse_entries(path, text, 3):
        # Topic names cannot contain spaces (legal chars: [a-zA-Z0-9._-]).
        try:
            result[(entry[0], int(entry[1]))] = int(entry[2])
        except ValueError:
            raise CheckpointError(f"{path}: malformed line {' '.join(entry)!r}") from None
    return result


# ---- leader-epoch-checkpoint: [(epoch, start_offset)] ----

def format_leader_epoch_checkpoint(entries: list[tuple[int, int]]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{epoch} {start_offset}" for epoch, start_offset in entries]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_leader_epoch_checkpoint(path: str, entries: list[tuple[int, int]], fsync: bool = True) -> None:
    write_atomic(path, format_leader_epoch_checkpoint(entries), fsync)


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    text = _read_text(path)
    if text is None:
        return []
    try:
        return [(int(e), int(o)) for e, o in _parse_entries(path, text, 2)]
    except ValueError:
        raise CheckpointError(f"{path}: malformed entry") from None


# ---- partition.metadata ----

def topic_id_to_str(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: base64url of the 16 bytes without '=' padding (22 chars)."""
    if len(topic_id) != 16:
        raise ValueError("topic id must be 16 bytes")
    return base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode("ascii")


def topic_id_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"bad topic id {text!r}")
    return raw


def format_partition_metadata(topic_id: bytes) -> bytes:
    return f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}".encode("ascii")


def write_partition_metadata(partition_dir: str, topic_id: bytes, fsync: bool = True) -> None:
    write_atomic(os.path.join(partition_dir, PARTITION_METADATA), format_partition_metadata(topic_id), fsync)


def read_partition_metadata(partition_dir: str) -> bytes | None:
    """The topic id, or None if the file does not exist."""
    path = os.path.join(partition_dir, PARTITION_METADATA)
    text = _read_text(path)
    if text is None:
        return None
    values = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        values[key.strip()] = value.strip()
    if values.get("version") != "0" or "topic_id" not in values:
        raise CheckpointError(f"{path}: unsupported content")
    try:
        return topic_id_from_str(values["topic_id"])
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None


# ---- meta.properties ----

def format_meta_properties(broker_id: int, cluster_id: str, now_s: float | None = None) -> bytes:
    # java.util.Properties.store writes a comment line and a date line first;
    # Kafka's reader ignores '#' lines.
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now_s))
    return f"#\n#{stamp}\ncluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n".encode("utf-8")


def write_meta_properties(log_dir: str, broker_id: int, cluster_id: str, fsync: bool = True) -> None:
    write_atomic(os.path.join(log_dir, META_PROPERTIES), format_meta_properties(broker_id, cluster_id), fsync)


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    text = _read_text(os.path.join(log_dir, META_PROPERTIES))
    if text is None:
        return None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, _, value = line.partition(sep)
                props[key.strip()] = value.strip()
                break
    return props


# ---- clean shutdown marker ----

def write_clean_shutdown_marker(log_dir: str, fsync: bool = True) -> None:
    write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN), b"", fsync)


def has_clean_shutdown_marker(log_dir: str) -> bool:
    return os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN))


def remove_clean_shutdown_marker(log_dir: str) -> None:
    try:
        os.unlink(os.path.join(log_dir, CLEAN_SHUTDOWN))
    except FileNotFoundError:
        return
    fsync_dir(log_dir)
