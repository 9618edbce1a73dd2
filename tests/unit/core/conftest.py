"""Fixtures running every _core test against the compiled module and its twin.

The compiled parameter is skipped only when the extension is not built and
KAFKAPY_REQUIRE_EXTENSIONS is not 1; when it is required, a missing build
fails the test instead of hiding behind the twin.
"""

import importlib
import os

import pytest

REQUIRE_EXTENSIONS = os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS", "") == "1"


def _import(name, implementation):
    if implementation == "twin":
        return importlib.import_module(f"kafkapy._core.{name}_py")
    try:
        return importlib.import_module(f"kafkapy._core.{name}")
    except ImportError as exc:
        if REQUIRE_EXTENSIONS:
            pytest.fail(f"kafkapy._core.{name} is not built: {exc}")
        pytest.skip(f"kafkapy._core.{name} is not built (python setup.py build_ext --inplace)")


@pytest.fixture(params=["compiled", "twin"])
def batch_mod(request):
    return _import("batch", request.param)


@pytest.fixture(params=["compiled", "twin"])
def index_mod(request):
    return _import("index", request.param)


@pytest.fixture
def both_batch_mods():
    """(compiled, twin) for agreement tests."""
    return _import("batch", "compiled"), _import("batch", "twin")


@pytest.fixture
def both_index_mods():
    return _import("index", "compiled"), _import("index", "twin")
