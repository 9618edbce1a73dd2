"""Fails when the extensions should be in use but kafkapy._core fell back to the twins."""

import os
import pathlib

import pytest

import kafkapy._core

# Every kafkapy/_core/<name>.pyx, so that a new compiled module is guarded
# without editing this list.
CORE_DIR = pathlib.Path(kafkapy._core.__file__).parent
COMPILED = sorted(path.stem for path in CORE_DIR.glob("*.pyx"))


def test_every_compiled_module_has_a_twin():
    # load() falls back to <name>_py: without it KAFKAPY_NO_EXTENSIONS=1 breaks.
    assert [name for name in COMPILED if not (CORE_DIR / f"{name}_py.py").exists()] == []


@pytest.mark.parametrize("name", COMPILED)
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
