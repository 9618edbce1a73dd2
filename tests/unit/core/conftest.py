"""Fixtures running every _core test against the compiled module and its twin.

The compiled parameter is skipped only when the extension is not built and
KAFKAPY_REQUIRE_EXTENSIONS is not 1; when it is required, a missing build
fails the test instead of hiding behind the twin.
"""


import pytest
from support.twins import REQUIRE_EXTENSIONS, import_core  # noqa: F401


@pytest.fixture(params=["compiled", "twin"])
def batch_mod(request):
    return import_core("batch", request.param)


@pytest.fixture(params=["compiled", "twin"])
def index_mod(request):
    return import_core("index", request.param)


@pytest.fixture(params=["compiled", "twin"])
def records_mod(request):
    return import_core("records", request.param)


@pytest.fixture(params=["compiled", "twin"])
def producer_mod(request):
    return import_core("producer", request.param)


@pytest.fixture(params=["compiled", "twin"])
def gil_io_mod(request):
    return import_core("gil_io", request.param)


@pytest.fixture
def both_batch_mods():
    """(compiled, twin) for agreement tests."""
    return import_core("batch", "compiled"), import_core("batch", "twin")


@pytest.fixture
def both_index_mods():
    return import_core("index", "compiled"), import_core("index", "twin")
