"""Fails when the extensions should be in use but kafkapy._core fell back to the twins."""

import os

import pytest

import kafkapy._core


@pytest.mark.parametrize("name", ["batch", "index"])
def test_compiled_module_loaded_when_required(name):
    module = kafkapy._core.load(name)
    if os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS", "") != "1":
        assert module.__name__ in (f"kafkapy._core.{name}", f"kafkapy._core.{name}_py")
        pytest.skip("KAFKAPY_REQUIRE_EXTENSIONS is not 1")
    assert module.__name__ == f"kafkapy._core.{name}", (
        f"load({name!r}) returned the twin {module.__name__}: the extension was not built "
        "or KAFKAPY_NO_EXTENSIONS is set"
    )
    assert module.__file__.endswith((".so", ".pyd")), module.__file__
