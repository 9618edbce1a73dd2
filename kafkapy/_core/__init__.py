"""Hot paths: record-batch scanning/patching and index search.

Each compiled module (``batch``, ``index``) has a plain-Python twin
(``batch_py``, ``index_py``) with the same API.  ``load(name)`` returns the
compiled module unless ``KAFKAPY_NO_EXTENSIONS=1`` is set or it was not built,
in which case the twin is returned.  A guard test fails when
``KAFKAPY_REQUIRE_EXTENSIONS=1`` and ``load`` fell back to a twin.
"""

import importlib
import os

NO_EXTENSIONS = os.environ.get("KAFKAPY_NO_EXTENSIONS", "") not in ("", "0")


def load(name: str):
    if not NO_EXTENSIONS:
        try:
            return importlib.import_module(f"kafkapy._core.{name}")
        except ImportError:
            pass
    return importlib.import_module(f"kafkapy._core.{name}_py")
