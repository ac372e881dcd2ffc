"""The package's version, written once: the build reads it from here into the package's
metadata (client/python/pyproject.toml, ``[tool.setuptools.dynamic]``)."""

__version__ = "0.1.0"
