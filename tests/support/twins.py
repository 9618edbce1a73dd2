"""The compiled `_core` module or its plain-Python twin, for parity tests.

The compiled one is skipped only when it is not built and
KAFKAPY_REQUIRE_EXTENSIONS is not 1; when it is required, a missing build
fails the test instead of hiding behind the twin.
"""

import importlib
import os

import pytest

REQUIRE_EXTENSIONS = os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS", "") == "1"


def import_core(name: str, implementation: str):
    """``implementation``: "compiled" or "twin"."""
    if implementation == "twin":
        return importlib.import_module(f"kafkapy._core.{name}_py")
    try:
        return importlib.import_module(f"kafkapy._core.{name}")
    except ImportError as exc:
        if REQUIRE_EXTENSIONS:
            pytest.fail(f"kafkapy._core.{name} is not built: {exc}")
        pytest.skip(f"kafkapy._core.{name} is not built (python setup.py build_ext --inplace)")
