"""Running Debian's ZooKeeper (the ``zookeeper`` package, 3.8) for a local cluster and for tests.

A standalone server from ``zoo.cfg`` in a directory of its own (dataDir
there, ``clientPort`` on 127.0.0.1 only, the admin server off, four-letter
words limited to ``ruok,srvr``), started from Debian's jar directly:

    java -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \\
         org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg

zookeeper.jar's manifest ``Class-Path`` names its dependencies in
/usr/share/java (netty, jute, metrics, ...), so the jar alone is the classpath
Debian's zkEnv.sh uses; slf4j-simple (libslf4j-java, a dependency of
libzookeeper-java) makes the server log to ``zookeeper.log`` in that
directory instead of slf4j's no-op logger.

Used by ``kafkapy-local-cluster`` (``make cluster``) and by the tests'
``tests/support/zookeeper.py``, which adds pause/restart and a kazoo check.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

JAVA = shutil.which("java") or "/usr/bin/java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A small heap and the serial collector: a local cluster's data set is a few
# hundred znodes, and the JVM shares the machine with the brokers. C1 only
# (TieredStopAtLevel=1) cuts JIT work at start-up.
JVM_FLAGS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")


def zookeeper_missing() -> str | None:
    """Why a ZooKeeper cannot be started here, or None if it can."""
    if not (os.path.exists(JAVA) and os.access(JAVA, os.X_OK)):
        return "no java (Debian package openjdk-17-jre-headless)"
    if not ZOOKEEPER_JAR.exists():
        return f"no {ZOOKEEPER_JAR} (Debian package zookeeper)"
    return None


# ZooKeeper's TLS port (secureClientPort) needs NettyServerCnxnFactory, and
# Debian 12's zookeeper.jar manifest names netty-handler and netty-transport
# but not what they need in turn: without these the server fails at start with
# NoClassDefFoundError io/netty/handler/codec/ByteToMessageDecoder.
NETTY_JARS = tuple(Path("/usr/share/java") / f"{name}.jar"
                   for name in ("netty-codec", "netty-resolver", "netty-transport-native-unix-common"))


def classpath() -> str:
    parts = [str(ZOOKEEPER_JAR)]
    if SLF4J_BINDING.exists():
        parts.append(str(SLF4J_BINDING))
    parts += [str(jar) for jar in NETTY_JARS if jar.exists()]
    return os.pathsep.join(parts)


def argv(config_path, jvm_flags=()) -> list:
    """``jvm_flags``: more ``-D`` settings, e.g. the server JAAS file of SASL
    (``-Djava.security.auth.login.config=...``)."""
    return [JAVA, *JVM_FLAGS, *jvm_flags, "-cp", classpath(), MAIN_CLASS, str(config_path)]


def write_config(work_dir: Path, port: int, tick_time_ms: int = 2000, extra=None,
                 ensemble: dict | None = None, my_id: int | None = None) -> dict:
    """Write ``work_dir/zoo.cfg`` for a server on 127.0.0.1:``port`` (data in
    ``work_dir/data``); returns the settings written.

    Standalone unless ``ensemble`` is given: ``{server id: (host, quorum port,
    election port)}`` of every member (ZooKeeper's ``server.N`` lines), this
    one being ``my_id`` (its ``myid`` file). A three-node ensemble keeps
    serving with any one member down, as operators run it."""
    data_dir = work_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "tickTime": tick_time_ms,
        "initLimit": 10,
        "syncLimit": 5,
        "dataDir": data_dir,
        "clientPort": port,
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr",
        # Standalone, no quorum ports, no dynamic reconfiguration.
        "standaloneEnabled": "true",
        "reconfigEnabled": "false",
        "maxClientCnxns": 0,
    }
    if ensemble:
        config["standaloneEnabled"] = "false"
        for sid, (host, quorum_port, election_port) in sorted(ensemble.items()):
            config[f"server.{sid}"] = f"{host}:{quorum_port}:{election_port}"
        (data_dir / "myid").write_text(f"{my_id}\n")
    config.update(extra or {})  # a None value removes a setting (a TLS-only server has no clientPort)
    config = {k: str(v) for k, v in config.items() if v is not None}
    (work_dir / "zoo.cfg").write_text("# written by kafkapy\n"
                                      + "".join(f"{k}={v}\n" for k, v in config.items()))
    return config


def four_letter_word(port: int, word: str, timeout_s: float = 2.0, host: str = "127.0.0.1",
                     ssl_context=None) -> str:
    """Send a four-letter command (only ``ruok`` and ``srvr`` are enabled); over
    TLS with ``ssl_context`` (a server serving only its secureClientPort)."""
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        s = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context is not None else raw
        s.sendall(word.encode())
        chunks = []
        while True:  # ends when the server closes the connection (or the timeout raises)
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def serving(port: int, host: str = "127.0.0.1", ssl_context=None) -> bool:
    """The server answers ``srvr`` with a mode: it has loaded its database and
    takes sessions (it binds its port before that and drops sessions meanwhile)."""
    try:
        return "Mode: " in four_letter_word(port, "srvr", timeout_s=1.0, host=host, ssl_context=ssl_context)
    except OSError:
        return False
