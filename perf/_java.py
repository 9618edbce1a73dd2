"""Apache's Java producer (kafka-clients 3.9) as a benchmark load.

``JavaProducerRun`` starts perf/java/PerfProducer.java in its own JVM (compiled
through tests/support/java_client.py, JIT at full tiers), waits for its
warm-up to end (``READY``), releases it (``go``) and reads its figures
(``result``). Several runs can be released together (a fleet). Every wait is
bounded; ``close`` kills the JVM if it is still running.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.java_client import JavaKafkaClient, java_client_missing  # noqa: E402

SOURCE = HERE / "java" / "PerfProducer.java"
# The full JIT (C2): the benchmark's JVM runs long enough for it to pay off.
JVM_FLAGS = ("-Xms256m", "-Xmx1g", "-Djava.net.preferIPv4Stack=true",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
_tool = None


def java_tool() -> JavaKafkaClient:
    """The compiled PerfProducer (compiled once per source change)."""
    global _tool
    if _tool is None:
        why = java_client_missing()
        if why:
            raise SystemExit(f"--client java: {why}")
        _tool = JavaKafkaClient(source=SOURCE, main_class="PerfProducer", jvm_flags=JVM_FLAGS)
        _tool.compile()
    return _tool


@dataclass
class JavaResult:
    acked: int
    errors: int
    elapsed_s: float
    client_cpu_s: float
    commits_ms: list
    flushes_ms: list


class JavaProducerRun:
    def __init__(self, bootstrap: str, topic: str, records: int, size: int, mode: str, partition: int = 0,
                 warmup: int = 0, configs: dict | None = None):
        args = ["--bootstrap", bootstrap, "--topic", topic, "--partition", str(partition),
                "--records", str(records), "--size", str(size), "--mode", mode, "--warmup", str(warmup)]
        for k, v in (configs or {}).items():
            args += ["--config", f"{k}={v}"]
        self.proc = subprocess.Popen(java_tool().argv(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._buf = ""

    def _line(self, deadline: float) -> str:
        fd = self.proc.stdout.fileno()
        while "\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the Java producer did not answer in time")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536).decode()
                if not chunk:
                    raise RuntimeError(f"the Java producer ended (exit {self.proc.wait(10)}): "
                                       f"{self.proc.stderr.read()[-2000:]}")
                self._buf += chunk
        line, self._buf = self._buf.split("\n", 1)
        return line

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        line = self._line(time.monotonic() + timeout_s)
        if not line.startswith("READY"):
            raise RuntimeError(f"unexpected line from the Java producer: {line!r}")

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout_s: float = 660.0) -> JavaResult:
        deadline = time.monotonic() + timeout_s
        lines = [self._line(deadline).split("\t") for _ in range(3)]
        if [f[0] for f in lines] != ["RESULT", "COMMITS", "FLUSHES"]:
            raise RuntimeError(f"unexpected lines from the Java producer: {lines!r}")
        self.proc.wait(60)
        fields = lines[0]

        def values(f):
            return [float(c) for c in (f[1] if len(f) > 1 else "").split(",") if c]

        return JavaResult(int(fields[1]), int(fields[2]), float(fields[3]), float(fields[4]),
                          values(lines[1]), values(lines[2]))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
