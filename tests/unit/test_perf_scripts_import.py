"""Every script in perf/ still imports: the benchmarks are not run by the
suite, so a module they import that moved (the restructuring moved many)
would otherwise be found only by the next person measuring. The stub broker
of ``bench_transactions.py --rev stub`` imported a name the restructuring had
renamed, and the transactions bench failed at its warm-up."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_IMPORT_ALL = """
import importlib, pathlib, sys
sys.path[:0] = ["perf", "."]
for f in sorted(pathlib.Path("perf").glob("*.py")):
    try:
        importlib.import_module(f.stem)
    except BaseException as exc:
        print(f"{f.name}: {type(exc).__name__}: {exc}")
"""


def test_every_perf_script_imports():
    scripts = sorted(p.name for p in (ROOT / "perf").glob("*.py"))
    assert "bench_transactions.py" in scripts and "txn_stub_broker.py" in scripts
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", done.stdout
