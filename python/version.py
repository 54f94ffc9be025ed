"""The package's version: the one definition (``setup.cfg`` reads it, ``tstream --version`` prints it)."""

__version__ = "0.1.0"
