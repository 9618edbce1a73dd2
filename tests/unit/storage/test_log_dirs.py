"""Offline log dirs (storage.log_dirs, Kafka's LogDirFailureChannel): one word of
the shared table every process sees, and what LogManager does with it."""

import os

import pytest

from kafkapy.storage.errors import KafkaStorageError
from kafkapy.storage.log_dirs import MAX_LOG_DIRS, OFFLINE_LOG_DIRS, LogDirFailureChannel
from kafkapy.storage.log_manager import LogManager
from kafkapy.storage.shared import SharedPartitionTable

from support.storage import no_fsync



@pytest.fixture
def table(tmp_path):
    t = SharedPartitionTable(16, str(tmp_path / "locks"))
    yield t
    t.close()


def test_marking_is_seen_through_the_table_and_moves_the_generation(tmp_path, table):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    one = LogDirFailureChannel(dirs, table, "metadata_generation")
    other = LogDirFailureChannel(dirs, table)  # another process's view of the same word
    assert one.mark_offline(dirs[1], "boom") is True
    assert other.offline_dirs() == [dirs[1]] and other.live_dirs() == [dirs[0]]
    assert table.counter(OFFLINE_LOG_DIRS) == 0b10 and table.counter("metadata_generation") == 1
    assert other.mark_offline(dirs[1]) is False  # once only: no second generation bump
    assert table.counter("metadata_generation") == 1
    assert not one.all_offline()
    other.mark_offline(dirs[0])
    assert one.all_offline()


def test_an_io_error_names_the_dir_and_takes_it_offline(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    channel = LogDirFailureChannel(dirs)
    error = channel.io_error(os.path.join(dirs[0], "t-0"), OSError(28, "No space left on device"),
                             "appending to t-0")
    assert isinstance(error, KafkaStorageError) and error.error_code == 56 and error.log_dir == dirs[0]
    assert "appending to t-0" in str(error) and channel.is_offline(dirs[0])
    with pytest.raises(KafkaStorageError):
        channel.check_online(os.path.join(dirs[0], "t-1"))
    channel.check_online(os.path.join(dirs[1], "t-1"))


def test_too_many_dirs_are_refused(tmp_path):
    with pytest.raises(ValueError):
        LogDirFailureChannel([str(tmp_path / str(i)) for i in range(MAX_LOG_DIRS + 1)])


def test_log_manager_never_opens_or_places_a_log_in_an_offline_dir(tmp_path, table):
    from kafkapy.storage.config import LogConfig
    from kafkapy.storage.shared import LocalPartitionState

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    manager = LogManager([a, b], LogConfig(), 0, fsync=no_fsync)
    manager.share_offline_dirs(table, "metadata_generation")
    first = manager.create_log("t", 0, None, LocalPartitionState())
    assert os.path.dirname(first.dir) == a
    manager.failure_channel.mark_offline(a)
    assert manager.is_log_offline("t", 0) and not manager.is_log_offline("t", 1)
    with pytest.raises(KafkaStorageError):
        manager.attach_log("t", 0, None, first.state)
    # A new partition goes to a live dir only (a is emptier but offline).
    assert os.path.dirname(manager.create_log("u", 0, None, LocalPartitionState()).dir) == b
    assert os.path.dirname(manager.create_log("u", 1, None, LocalPartitionState()).dir) == b
    # Maintenance and shutdown write nothing to the offline dir.
    manager.shutdown()
    assert os.path.exists(os.path.join(b, ".kafka_cleanshutdown"))
    assert not os.path.exists(os.path.join(a, ".kafka_cleanshutdown"))
    assert not os.path.exists(os.path.join(a, "recovery-point-offset-checkpoint"))


def test_a_partition_deleted_meanwhile_is_no_dir_failure(tmp_path):
    from kafkapy.storage.config import LogConfig
    from kafkapy.storage.log import Log
    from kafkapy.storage.shared import LocalPartitionState

    log = Log.open(str(tmp_path / "t-0"), "t", 0, LogConfig(), LocalPartitionState(), fsync=no_fsync)
    log.failure_channel = LogDirFailureChannel([str(tmp_path)])
    os.rename(log.dir, log.dir + ".0123-delete")  # another process's DeleteTopics
    error = log.io_error(FileNotFoundError(2, "No such file or directory"), "appending to")
    assert error.error_code == 3 and not log.failure_channel.offline_dirs()  # UNKNOWN_TOPIC_OR_PARTITION
    error = log.io_error(OSError(28, "No space left on device"), "appending to")
    assert error.error_code == 56 and log.failure_channel.offline_dirs() == [str(tmp_path)]


def test_a_failed_metadata_store_write_takes_the_first_dir_offline(tmp_path, table):
    import shutil

    from kafkapy.metadata.embedded import EmbeddedMetadataStore

    first = tmp_path / "first"
    first.mkdir()
    store = EmbeddedMetadataStore(str(first), table)
    shutil.rmtree(first)  # the file system under it is gone
    with pytest.raises(OSError):
        store.update(lambda md: None)
    channel = LogDirFailureChannel([str(first), str(tmp_path / "second")], table)
    assert channel.offline_dirs() == [str(first)]  # the supervisor then stops the broker
