"""The machine's limits, measured the way the brokers use the machine.

Each figure is an upper bound for one part of a broker's work on this host,
so a broker figure can be read as a share of what the hardware allows:

* ``loopback_tcp``: a sender process pushing 1 MiB ``send`` calls to a
  receiver process over 127.0.0.1 with 4 MiB socket buffers; bounds produce
  (bytes in) and consume (bytes out) throughput.
* ``sendfile``: ``os.sendfile`` of a file already in the page cache to a
  loopback socket drained by another process; bounds kafkapy's fetch path,
  which serves record data from segment files this way.
* ``write``: sequential 1 MiB ``write`` calls to a file in the temp dir,
  without fsync (page cache only, kafkapy's default) and with an fsync after
  every 1 MiB (the cost of ``flush.messages=1``-style durability).
* ``crc32c``: the ``crc32c`` package over a 1 MiB buffer; every produced
  batch is CRC-checked once by the broker.

Every measurement is bounded by bytes and by wall time. Functions return
``{"mb_per_s": ..., ...}`` with MB = 10^6 bytes. Owned by the suite driver;
children are started and reaped here.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import tempfile
import time

CHUNK = 1 << 20
SOCK_BUF = 4 << 20


def _drain(port: int, ready) -> None:
    """Receiver: accept one connection and read until EOF."""
    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCK_BUF)
        srv.bind(("127.0.0.1", port))
        srv.listen(1)
        ready.set()
        conn, _ = srv.accept()
        buf = bytearray(CHUNK)
        with conn:
            while conn.recv_into(buf):
                pass


def _with_receiver(send_fn) -> float:
    """Start a draining receiver, run send_fn(sock) -> bytes, return MB/s."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    rx = ctx.Process(target=_drain, args=(port, ready), daemon=True)
    rx.start()
    try:
        if not ready.wait(10):
            raise RuntimeError("receiver did not start")
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCK_BUF)
            start = time.perf_counter()
            sent = send_fn(sock)
            sock.shutdown(socket.SHUT_WR)
        rx.join(30)
        # The receiver has read everything once it exits: time to here.
        elapsed = time.perf_counter() - start
        return sent / 1e6 / elapsed
    finally:
        if rx.is_alive():
            rx.kill()
            rx.join(5)


def loopback_tcp(total_bytes: int, max_s: float) -> dict:
    data = b"x" * CHUNK

    def send(sock):
        sent = 0
        deadline = time.monotonic() + max_s
        while sent < total_bytes and time.monotonic() < deadline:
            sock.sendall(data)
            sent += CHUNK
        return sent

    return {"mb_per_s": round(_with_receiver(send), 1),
            "method": "Python send 1 MiB -> recv_into, 2 processes, 4 MiB buffers"}


def sendfile(total_bytes: int, max_s: float, workdir: str) -> dict:
    # A file of at most 256 MiB sent repeatedly: it stays in the page cache
    # (written just before, then read once), as recent segments do.
    file_bytes = min(total_bytes, 256 << 20)
    path = os.path.join(workdir, "sendfile.bin")
    with open(path, "wb") as f:
        block = os.urandom(CHUNK)
        for _ in range(file_bytes // CHUNK):
            f.write(block)
    with open(path, "rb") as f:
        while f.read(8 * CHUNK):
            pass
    fd = os.open(path, os.O_RDONLY)
    try:
        def send(sock):
            sent = 0
            deadline = time.monotonic() + max_s
            sock.setblocking(True)
            while sent < total_bytes and time.monotonic() < deadline:
                pos = 0
                while pos < file_bytes:
                    n = os.sendfile(sock.fileno(), fd, pos, file_bytes - pos)
                    if n == 0:
                        break
                    pos += n
                sent += pos
            return sent
        mbps = _with_receiver(send)
    finally:
        os.close(fd)
        os.unlink(path)
    return {"mb_per_s": round(mbps, 1),
            "method": f"os.sendfile of a {file_bytes >> 20} MiB page-cache file to loopback"}


def sequential_write(total_bytes: int, max_s: float, workdir: str,
                     fsync_every_bytes: int | None) -> dict:
    path = os.path.join(workdir, "write.bin")
    block = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    try:
        start = time.perf_counter()
        deadline = time.monotonic() + max_s
        since_sync = 0
        while written < total_bytes and time.monotonic() < deadline:
            written += os.write(fd, block)
            since_sync += CHUNK
            if fsync_every_bytes and since_sync >= fsync_every_bytes:
                os.fsync(fd)
                since_sync = 0
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    method = ("write 1 MiB, no fsync (page cache)" if not fsync_every_bytes else
              f"write 1 MiB + fsync every {fsync_every_bytes >> 10} KiB")
    return {"mb_per_s": round(written / 1e6 / elapsed, 1), "method": method,
            "fs_dir": workdir}


def crc32c_rate(total_bytes: int, max_s: float) -> dict:
    import crc32c

    buf = os.urandom(CHUNK)
    done = 0
    crc = 0
    start = time.perf_counter()
    deadline = time.monotonic() + max_s
    while done < total_bytes and time.monotonic() < deadline:
        crc = crc32c.crc32c(buf, crc)
        done += CHUNK
    elapsed = time.perf_counter() - start
    hw = getattr(crc32c, "hardware_based", None)
    return {"mb_per_s": round(done / 1e6 / elapsed, 1),
            "method": f"crc32c package over 1 MiB buffers (hardware_based={hw})"}


def _echo(port: int, ready, size: int) -> None:
    """Answer every `size`-byte message with `size` bytes until EOF."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", port))
        srv.listen(1)
        ready.set()
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while True:
                data = conn.recv(size)
                if not data:
                    return
                conn.sendall(data)


def loopback_round_trip(count: int, max_s: float, size: int = 200) -> dict:
    """Request/response round trips per second on one connection between two
    Python processes: what any broker answering one request at a time on one
    connection can reach at best here (the small-request test's limit)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    peer = ctx.Process(target=_echo, args=(port, ready, size), daemon=True)
    peer.start()
    try:
        ready.wait(10)
        msg = b"r" * size
        lat = []
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline = time.monotonic() + max_s
            start = time.perf_counter()
            done = 0
            while done < count and time.monotonic() < deadline:
                t0 = time.perf_counter_ns()
                sock.sendall(msg)
                got = 0
                while got < size:
                    got += len(sock.recv(size - got))
                lat.append((time.perf_counter_ns() - t0) / 1000)
                done += 1
            elapsed = time.perf_counter() - start
        peer.join(10)
    finally:
        if peer.is_alive():
            peer.kill()
            peer.join(5)
    lat.sort()
    return {"round_trips_per_s": round(done / elapsed, 1), "mb_per_s": None,
            "p50_us": round(lat[len(lat) // 2], 1),
            "p99_us": round(lat[int(len(lat) * 0.99)], 1),
            "method": f"{size}-byte ping-pong, 2 Python processes, TCP_NODELAY"}


def measure_all(quick: bool, workdir: str) -> dict:
    """Every limit, each bounded to ~2 s (quick) or ~5 s of wall time."""
    max_s = 2.0 if quick else 5.0
    total = (1 << 30) if quick else (4 << 30)
    out = {}
    for name, fn in (
        ("loopback_tcp", lambda: loopback_tcp(total, max_s)),
        ("sendfile", lambda: sendfile(total, max_s, workdir)),
        ("write_no_fsync", lambda: sequential_write(min(total, 1 << 30), max_s,
                                                    workdir, None)),
        ("write_fsync_1mib", lambda: sequential_write(min(total, 256 << 20), max_s,
                                                      workdir, CHUNK)),
        ("crc32c", lambda: crc32c_rate(total, max_s)),
        ("round_trip", lambda: loopback_round_trip(20_000 if quick else 100_000, max_s)),
    ):
        try:
            out[name] = fn()
        except Exception as exc:  # noqa: BLE001 - one failed limit must not end the suite
            out[name] = {"mb_per_s": None, "error": f"{type(exc).__name__}: {exc}"}
        out[name]["loadavg_1m"] = round(os.getloadavg()[0], 2)
    return out


if __name__ == "__main__":
    import json
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(measure_all(True, d), indent=2))
