"""A stub that answers a transactional producer at once, for
perf/bench_transactions.py's ``--stub`` floor: what a client this fast can
reach when the broker costs (almost) nothing. NOT a broker: nothing is
stored, checked or replicated; every request of the few APIs a producer
uses (ApiVersions, Metadata, FindCoordinator, InitProducerId,
AddPartitionsToTxn, Produce, EndTxn) is answered from memory with success,
one partition per topic led by this stub. Single-threaded, one process.

Run: ``python perf/txn_stub_broker.py PORT`` (serves 127.0.0.1:PORT until killed).
"""

from __future__ import annotations

import itertools
import selectors
import socket
import struct
import sys

from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.entities import construct
from kafkapy.protocol.codec import decode
from kafkapy.protocol.headers import encode_response, read_request_header, skip_tagged_fields
from kafkapy.server.handlers.api_versions import build_response as api_versions_response

_SIZE = struct.Struct(">i")
API_VERSIONS, METADATA, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, PRODUCE, END_TXN = 18, 3, 10, 22, 24, 0, 26


class Stub:
    def __init__(self, port: int):
        self.port = port
        self.producer_ids = itertools.count(1000)
        self.offsets: dict[str, int] = {}

    def answer(self, api_key: int, version: int, request):
        if api_key == API_VERSIONS:
            return api_versions_response(version)
        data = {"throttle_time": 0, "error_code": 0}
        if api_key == METADATA:
            names = [t.name for t in request.topics or ()]
            data.update(brokers=[{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
                        cluster_id="stub", controller_id=0, topics=[
                            {"error_code": 0, "name": n, "topic_id": None, "is_internal": False,
                             "topic_authorized_operations": -2147483648, "partitions": [
                                 {"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                                  "replica_nodes": (0,), "isr_nodes": (0,), "offline_replicas": ()}]}
                            for n in names])
        elif api_key == FIND_COORDINATOR:
            keys = getattr(request, "coordinator_keys", None) or [getattr(request, "key", "")]
            data.update(node_id=0, host="127.0.0.1", port=self.port, error_message=None, coordinators=[
                {"key": k, "node_id": 0, "host": "127.0.0.1", "port": self.port, "error_code": 0,
                 "error_message": None} for k in keys])
        elif api_key == INIT_PRODUCER_ID:
            data.update(producer_id=next(self.producer_ids), producer_epoch=0)
        elif api_key == ADD_PARTITIONS:
            if version < 4:
                data["results_by_topic_v3_and_below"] = [
                    {"name": t.name, "results_by_partition": [
                        {"partition_index": p, "partition_error_code": 0} for p in t.partitions]}
                    for t in request.v3_and_below_topics]
            else:
                data["results_by_transaction"] = [
                    {"transactional_id": x.transactional_id, "topic_results": [
                        {"name": t.name, "results_by_partition": [
                            {"partition_index": p, "partition_error_code": 0} for p in t.partitions]}
                        for t in x.topics]} for x in request.transactions]
        elif api_key == PRODUCE:
            responses = []
            for t in request.topic_data:
                parts = []
                for p in t.partition_data:
                    base = self.offsets.get(t.name, 0)
                    count = struct.unpack_from(">i", p.records, 57)[0] if p.records else 0
                    self.offsets[t.name] = base + count
                    parts.append({"index": p.index, "error_code": 0, "base_offset": base, "log_append_time": -1,
                                  "log_start_offset": 0, "record_errors": (), "error_message": None})
                responses.append({"name": t.name, "partition_responses": parts})
            data["responses"] = responses
        elif api_key != END_TXN:
            raise ValueError(f"the stub does not answer api key {api_key}")
        return construct(API_TABLE[api_key].response_class(version), data)

    def handle(self, frame: bytes) -> list:
        buf = memoryview(frame)
        header = read_request_header(buf)
        spec = API_TABLE[header.api_key]
        flexible = spec.is_flexible(header.api_version)
        offset = skip_tagged_fields(buf, header.offset) if flexible else header.offset
        request, _ = decode(spec.request_class(header.api_version), buf, offset)
        response = self.answer(header.api_key, header.api_version, request)
        return encode_response(header.correlation_id, response, flexible and header.api_key != API_VERSIONS)

    def serve(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        pending: dict[socket.socket, bytearray] = {}
        while True:
            for key, _ in sel.select():
                sock = key.fileobj
                if sock is listener:
                    conn, _ = listener.accept()
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sel.register(conn, selectors.EVENT_READ)
                    pending[conn] = bytearray()
                    continue
                try:
                    data = sock.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(sock)
                    pending.pop(sock, None)
                    sock.close()
                    continue
                buf = pending[sock]
                buf += data
                out = []
                while len(buf) >= 4 and len(buf) - 4 >= _SIZE.unpack_from(buf)[0]:
                    (n,) = _SIZE.unpack_from(buf)
                    parts = self.handle(bytes(buf[4:4 + n]))
                    del buf[:4 + n]
                    out.append(b"".join(bytes(x) for x in parts))  # size prefix included
                if out:
                    sock.setblocking(True)
                    sock.sendall(b"".join(out))
                    sock.setblocking(False)


if __name__ == "__main__":
    Stub(int(sys.argv[1])).serve()
