"""Build the Cython hot paths of kafkapy._core.

Metadata lives in pyproject.toml; this file only declares the extensions.
``KAFKAPY_NO_EXTENSIONS=1`` at build time skips them, and the package then
runs on the plain-Python twins (kafkapy._core.load picks whichever exists).
"""

import os

from setuptools import setup

# Each entry is kafkapy/_core/<name>.pyx with a <name>_py.py twin.
CORE_EXTENSIONS = ("batch", "index", "records", "producer", "gil_io", "murmur2", "tls", "offset_map", "request_read")


def _extensions():
    if os.environ.get("KAFKAPY_NO_EXTENSIONS", "") not in ("", "0"):
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    modules = [
        Extension(f"kafkapy._core.{name}", [f"kafkapy/_core/{name}.pyx"])
        for name in CORE_EXTENSIONS
    ]
    return cythonize(modules, compiler_directives={"language_level": "3"}, quiet=True)


setup(ext_modules=_extensions())
