"""The package layers hold: a lower package never imports a higher one.

The contracts are in pyproject.toml ([tool.importlinter]); import-linter
counts function-level (lazy) imports too, so a hidden cycle such as the
coordinator importing the server's reactor inside a method fails here.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), "import-linter is a test dependency: pip install -e '.[test]'"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
