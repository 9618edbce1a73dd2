"""Kafka's text files, byte for byte."""

import os

import pytest

from kafkapy.storage import checkpoints as cp


def test_offset_checkpoint_format(tmp_path):
    path = str(tmp_path / cp.RECOVERY_POINT_CHECKPOINT)
    cp.write_offset_checkpoint(path, {("orders", 0): 42, ("my.topic_x-y", 11): 0})
    with open(path, "rb") as f:
        assert f.read() == b"0\n2\norders 0 42\nmy.topic_x-y 11 0\n"
    assert cp.read_offset_checkpoint(path) == {("orders", 0): 42, ("my.topic_x-y", 11): 0}
    assert not os.path.exists(path + ".tmp")


def test_offset_checkpoint_missing_and_empty(tmp_path):
    path = str(tmp_path / "x")
    assert cp.read_offset_checkpoint(path) == {}
    cp.write_offset_checkpoint(path, {}, fsync=False)
    with open(path, "rb") as f:
        assert f.read() == b"0\n0\n"
    assert cp.read_offset_checkpoint(path) == {}


@pytest.mark.parametrize("content", [b"1\n0\n", b"0\n2\nt 0 1\n", b"0\n1\nt 0\n", b"0\n1\nt x 1\n", b"zero\n"])
def test_offset_checkpoint_malformed(tmp_path, content):
    path = tmp_path / "cp"
    path.write_bytes(content)
    with pytest.raises(cp.CheckpointError):
        cp.read_offset_checkpoint(str(path))


def test_leader_epoch_checkpoint_format(tmp_path):
    path = str(tmp_path / cp.LEADER_EPOCH_CHECKPOINT)
    cp.write_leader_epoch_checkpoint(path, [(0, 0), (3, 1500)])
    with open(path, "rb") as f:
        assert f.read() == b"0\n2\n0 0\n3 1500\n"
    assert cp.read_leader_epoch_checkpoint(path) == [(0, 0), (3, 1500)]


def test_partition_metadata_format(tmp_path):
    topic_id = bytes(range(16))
    cp.write_partition_metadata(str(tmp_path), topic_id)
    with open(tmp_path / cp.PARTITION_METADATA, "rb") as f:
        # Kafka's Uuid.toString: URL-safe base64, no padding, 22 characters.
        assert f.read() == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert cp.read_partition_metadata(str(tmp_path)) == topic_id
    (tmp_path / cp.PARTITION_METADATA).write_bytes(b"version: 0\ntopic_id: -_8AAAAAAAAAAAAAAAAAAA\n")
    assert cp.read_partition_metadata(str(tmp_path)) == b"\xfb\xff" + bytes(14)


def test_meta_properties(tmp_path):
    cp.write_meta_properties(str(tmp_path), 3, "AbCdEfGhIjKlMnOpQrStUv")
    text = (tmp_path / cp.META_PROPERTIES).read_text()
    assert text.startswith("#\n#")
    assert "version=0\n" in text and "broker.id=3\n" in text and "cluster.id=AbCdEfGhIjKlMnOpQrStUv\n" in text
    props = cp.read_meta_properties(str(tmp_path))
    assert props == {"version": "0", "broker.id": "3", "cluster.id": "AbCdEfGhIjKlMnOpQrStUv"}


def test_clean_shutdown_marker(tmp_path):
    d = str(tmp_path)
    assert not cp.has_clean_shutdown_marker(d)
    cp.write_clean_shutdown_marker(d)
    assert cp.has_clean_shutdown_marker(d)
    assert os.path.getsize(os.path.join(d, ".kafka_cleanshutdown")) == 0
    cp.remove_clean_shutdown_marker(d)
    cp.remove_clean_shutdown_marker(d)
    assert not cp.has_clean_shutdown_marker(d)
