"""Fixtures shared by the unit tests."""

import pytest

from kafkapy.storage.shared import SharedPartitionTable


@pytest.fixture
def table(tmp_path):
    """A real shared partition table (anonymous shared mapping and lock file) in a temp dir."""
    t = SharedPartitionTable(capacity=1024, lock_path=str(tmp_path / "partitions.lock"))
    yield t
    t.close()
