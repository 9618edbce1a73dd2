"""Produce and consume throughput over PLAINTEXT, SSL and SASL_SSL, same run,
and the TLS handshake rate.

Run:  .venv/bin/python perf/bench_security.py [--records 200000] [--size 1024] [--repo DIR]

One broker (started through ``python -m kafkapy`` from ``--repo``, default
this checkout; point it at another checkout to compare code) with three
listeners. Per protocol: a confluent-kafka producer writes ``--records``
records of ``--size`` bytes to a fresh one-partition topic (acks=1,
linger.ms=5, batch.size=1000000), then a consumer reads them back by
assignment from the beginning. Figures: MB/s of record values (MB = 10^6 B)
and the broker's CPU seconds per GB (utime+stime of its process tree).
Handshakes: new connections per second, each a TLS handshake plus one
ApiVersions round trip, from one client thread for ``--handshake-s`` seconds.
Beside them, where the produce time goes: the processor's CPU per GB (it
decrypts), the client's (this process: librdkafka encrypts), and the machine
limit of the cipher the handshake negotiates: one core decrypting 1 MiB
writes through an ``SSLObject`` pair over memory BIOs with the processor's
reader (``tls_decrypt_MBps``, ``tls_encrypt_MBps``), and librdkafka's small
records through it and through its plain-Python twin (``..._small``,
``..._small_twin``).
``--protocols PLAINTEXT`` runs against a checkout without TLS support.
``--client java``: the producer is Apache's Java client (kafka-clients 3.9,
the reference client; perf/java/PerfProducer.java in its own JVM, warmed up
with ``--java-warmup`` records first) with the same acks=1, linger.ms=5,
batch.size=1000000 unless ``--producer-conf`` says otherwise; it writes whole
16 KiB TLS records, where librdkafka writes one per buffer segment. The
consumer stays confluent-kafka; ``produce_client_cpu_s_per_GB`` is then the
JVM's.
Each round's topic is deleted after it is read (the page cache would fill
over the rounds otherwise), every timed produce starts after ``os.sync()``
(the previous run's dirty pages written back: past the kernel's dirty
threshold, ~10 % of memory, writers are throttled, and a run would pay for
the one before it), and each round starts with the next protocol, so that
none always runs last; the last line gives each protocol's rate as a share of
its round's PLAINTEXT (median and every round). ``--pin``: the broker's processes on CPU 0, this process and its clients
(the JVM included) on CPU 1, so neither takes the other's core: each
protocol's rate is then the slower side's, which the CPU columns tell.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import ssl
import struct
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from support.broker import BrokerProcess, free_port, process_group_members  # noqa: E402
from support.certs import make_certs  # noqa: E402
from support.tls_memory import memory_tls, tls_contexts  # noqa: E402


def _cpu_by_process(pgid: int) -> dict:
    """CPU seconds (utime+stime) of each process of the broker, by name."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict = {}
    for pid, *_ in process_group_members(pgid):
        try:
            head, rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        name = head.split("(", 1)[1].split("-")[0].split(" ")[-1]
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _cpu_s(pgid: int) -> float:
    return sum(_cpu_by_process(pgid).values())


def _client_conf(protocol, certs, port):
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(certs.ca_cert)
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "bench", "sasl.password": "bench-secret"})
    return conf


# The producer settings of every protocol and client (librdkafka's defaults
# for linger and batch size; acks=1).
PRODUCE_SETTINGS = {"acks": 1, "linger.ms": 5, "batch.size": 1000000}


def _java_conf(protocol, certs) -> dict:
    conf = {"security.protocol": protocol}
    if "SSL" in protocol:
        conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert)})
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                         'username="bench" password="bench-secret";'})
    return conf


def _produce_java(protocol, certs, port, topic, records, size, warmup, extra, on_release):
    """(seconds, the JVM's CPU seconds) of ``records`` records through the
    Java producer, timed after its ``warmup`` records (perf/_java.py);
    ``on_release()`` runs between the warm-up and the timed part."""
    from _java import JavaProducerRun

    conf = {**PRODUCE_SETTINGS, **_java_conf(protocol, certs), **(extra or {})}
    run = JavaProducerRun(f"127.0.0.1:{port}", topic, records, size, "idempotent", warmup=warmup, configs=conf)
    try:
        run.wait_ready()
        on_release()
        run.go()
        result = run.result()
    finally:
        run.close()
    assert result.acked == records and result.errors == 0, result
    return result.elapsed_s, result.client_cpu_s


def _produce(conf, topic, records, size, extra=None):
    import confluent_kafka

    from _brokers import timed_produce

    producer = confluent_kafka.Producer({**conf, **PRODUCE_SETTINGS, "queue.buffering.max.kbytes": 1048576,
                                         **(extra or {})})
    return timed_produce(producer, topic, b"x" * size, records, os.getpid())[0]


def _consume(conf, topic, records):
    import confluent_kafka

    consumer = confluent_kafka.Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                                         "fetch.max.bytes": 52428800, "fetch.queue.backoff.ms": 10})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = 0
    started = time.monotonic()
    deadline = started + 300
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.monotonic() - started
    consumer.close()
    assert got == records, (got, records)
    return elapsed


def _delete_topic(port: int, topic: str) -> None:
    """Delete a measured topic (its files go ``file.delete.delay.ms`` later, 1 s
    here): the rounds' GBs would otherwise fill the page cache, and the later
    rounds' writes pay the kernel's reclaim (plaintext produce fell from
    ~900 to ~300 MB/s by the fourth round of five)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.delete_topics([topic], request_timeout=30)[topic].result(30)
    time.sleep(1.5)


def _client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cipher_limit(certs, megabytes=100) -> dict:
    """One core's TLS record encryption and decryption rate (MB/s) with the
    suite a default client and the broker's context settle on, decrypting
    as the processor does (``kafkapy._core`` tls reader, the compiled one
    when built): in 16 KiB records (1 MiB writes, what the Java client
    sends) and in librdkafka's records (one ``SSL_write`` per buffer
    segment: a 10-byte record header, then the 1 KiB value), the latter
    also through the plain-Python twin (``..._twin``: one ``SSLObject.read``
    per record). ``tls_records_per_s_small``: records decrypted per second."""
    from kafkapy._core import load, tls_py

    server, client = tls_contexts(certs)
    out = bytearray(1 << 21)
    rates = {}
    compiled = load("tls")
    for shape, module in (("large", compiled), ("small", compiled), ("small", tls_py)):
        tls = memory_tls(server, client)
        reader = module.Reader(tls.server, tls.server_in)
        wire, records, size = [], 0, 0
        started = time.perf_counter()
        while size < megabytes * (1 << 20):
            if shape == "large":
                tls.client.write(b"x" * (1 << 20))
                size, records = size + (1 << 20), records + 64
            else:
                for _ in range(512):
                    tls.client.write(b"h" * 10)
                    tls.client.write(b"v" * 1024)
                size, records = size + 512 * 1034, records + 1024
            wire.append(tls.client_out.read())
        encrypt_s = time.perf_counter() - started
        started = time.perf_counter()
        for ciphertext in wire:
            tls.server_in.write(ciphertext)
            while reader.read_into(out, 0, len(out)) > 0:
                pass
        decrypt_s = time.perf_counter() - started
        mb = size / 1e6
        suffix = ("" if shape == "large" else "_small") + ("_twin" if module is tls_py and compiled is not tls_py else "")
        if not suffix.endswith("_twin"):
            rates[f"tls_encrypt_MBps{suffix}"] = round(mb / encrypt_s)
        rates[f"tls_decrypt_MBps{suffix}"] = round(mb / decrypt_s)
        if shape == "small":
            rates[f"tls_records_per_s{suffix}"] = round(records / decrypt_s)
    return {"cipher": tls.server.cipher()[0], "reader": compiled.__name__, **rates}


def _handshakes(certs, port, seconds):
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    payload = struct.pack(">hhih", 18, 0, 1, -1)
    frame = struct.pack(">i", len(payload)) + payload
    n = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                             server_hostname="127.0.0.1") as s:
            s.sendall(frame)
            assert len(s.recv(8)) == 8
        n += 1
    return n / (time.monotonic() - started)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--protocols", default="PLAINTEXT,SSL,SASL_SSL")
    parser.add_argument("--handshake-s", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--producer-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a producer setting for every protocol (repeatable)")
    parser.add_argument("--client", choices=("confluent", "java"), default="confluent",
                        help="the producer: confluent-kafka (librdkafka) or Apache's Java client")
    parser.add_argument("--java-warmup", type=int, default=100000)
    parser.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting (repeatable), e.g. ssl.cipher.suites=TLS_AES_128_GCM_SHA256")
    parser.add_argument("--pin", action="store_true",
                        help="broker on CPU 0, the clients on CPU 1 (needs 2 CPUs)")
    args = parser.parse_args(argv)
    broker_prefix = []
    if args.pin:
        broker_prefix = [shutil.which("taskset") or "taskset", "-c", "0"]
        os.sched_setaffinity(0, {1})
    producer_conf = dict(kv.split("=", 1) for kv in args.producer_conf)
    if args.client == "java":
        from _java import java_tool

        java_tool()
    protocols = args.protocols.split(",")
    work = Path(tempfile.mkdtemp(prefix="kafkapy-bench-security-"))
    certs = make_certs(work / "certs")
    ports = {p: free_port() for p in protocols}
    listeners = ",".join(f"{p}://127.0.0.1:{ports[p]}" for p in protocols)
    overrides = {"listeners": listeners, "advertised.listeners": listeners, "num.partitions": 1,
                 "log.dirs": str(work / "logs"), "file.delete.delay.ms": 1000}
    if any(p != "PLAINTEXT" for p in protocols):
        overrides.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
                          "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
        from kafkapy.server.security.scram_store import add_scram_credentials

        add_scram_credentials(str(work / "logs"), "bench", "SCRAM-SHA-256", "bench-secret")
    overrides.update(dict(kv.split("=", 1) for kv in args.broker_conf))
    first = protocols[0]
    broker = BrokerProcess(work / "broker", overrides, port=ports[first] if first == "PLAINTEXT" else None,
                           command=[*broker_prefix, sys.executable, "-m", "kafkapy"], env={"PYTHONPATH": args.repo})
    if first != "PLAINTEXT":
        raise SystemExit("the first protocol must be PLAINTEXT (the harness probes it)")
    broker.start()
    results = []
    try:
        for rep in range(args.repeat):
            # Each round starts with the next protocol, so none always runs
            # last in a round (after the most bytes written).
            shift = rep % len(protocols)
            for protocol in protocols[shift:] + protocols[:shift]:
                conf = _client_conf(protocol, certs, ports[protocol])
                # The last run's pages written back before this one is timed:
                # past ~10 % of memory dirty the kernel throttles writers, and
                # a run would measure the one before it.
                os.sync()
                topic = f"bench-{protocol.lower()}-{rep}"
                mb = args.records * args.size / 1e6
                cpu0 = _cpu_s(broker.pgid)
                by0 = _cpu_by_process(broker.pgid)
                if args.client == "java":
                    before = {}

                    def released():
                        before.update(cpu=_cpu_s(broker.pgid), by=_cpu_by_process(broker.pgid))

                    produce_s, client1 = _produce_java(protocol, certs, ports[protocol], topic, args.records,
                                                       args.size, args.java_warmup, producer_conf, released)
                    cpu0, by0, client0 = before["cpu"], before["by"], 0.0
                else:
                    client0 = _client_cpu_s()
                    produce_s = _produce(conf, topic, args.records, args.size, producer_conf)
                    client1 = _client_cpu_s()
                cpu1 = _cpu_s(broker.pgid)
                by1 = _cpu_by_process(broker.pgid)
                in_topic = args.records + (args.java_warmup if args.client == "java" else 0)
                consume_s = _consume(conf, topic, in_topic) * args.records / in_topic
                cpu2 = _cpu_s(broker.pgid)
                row = {"protocol": protocol, "produce_MBps": round(mb / produce_s, 1),
                       "produce_cpu_s_per_GB": round((cpu1 - cpu0) / mb * 1000, 1),
                       # comm is cut to 15 characters: "kafkapy process(or-N)"
                       "produce_processor_cpu_s_per_GB": round((by1.get("process", 0.0) - by0.get("process", 0.0))
                                                               / mb * 1000, 2),
                       "produce_client_cpu_s_per_GB": round((client1 - client0) / mb * 1000, 2),
                       "consume_MBps": round(mb / consume_s, 1),
                       "consume_cpu_s_per_GB": round((cpu2 - cpu1) / mb * 1000, 1),
                       "produce_cpu_s_by_process": {k: round(v - by0.get(k, 0.0), 2) for k, v in by1.items()
                                                    if v - by0.get(k, 0.0) >= 0.01}}
                row["round"] = rep
                results.append(row)
                print(json.dumps(row), flush=True)
                _delete_topic(ports["PLAINTEXT"], topic)
        summary = _round_ratios(results, protocols)
        if summary:
            results.append(summary)
            print(json.dumps(summary), flush=True)
        if "SSL" in ports:
            rate = _handshakes(certs, ports["SSL"], args.handshake_s)
            results.append({"tls_handshakes_per_s": round(rate, 1)})
            print(json.dumps(results[-1]), flush=True)
            results.append(_cipher_limit(certs))
            print(json.dumps(results[-1]), flush=True)
    finally:
        broker.stop()
        broker.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _round_ratios(rows, protocols) -> dict:
    """Each protocol's produce and consume rate as a share of the same
    round's PLAINTEXT: the median over the rounds and every round's."""
    import statistics

    base = {r["round"]: r for r in rows if r.get("protocol") == "PLAINTEXT"}
    out = {}
    for protocol in protocols:
        if protocol == "PLAINTEXT":
            continue
        for what in ("produce", "consume"):
            shares = [round(r[f"{what}_MBps"] / base[r["round"]][f"{what}_MBps"], 3) for r in rows
                      if r.get("protocol") == protocol and r["round"] in base]
            if shares:
                out[f"{protocol}_{what}_vs_plaintext"] = {"median": statistics.median(shares), "rounds": shares}
    return out


if __name__ == "__main__":
    sys.exit(main())
