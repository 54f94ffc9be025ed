"""The ``tstream`` command line: one module per group of subcommands, ``main`` in :mod:`.app`."""

from __future__ import annotations

from .app import main

__all__ = ["main"]
