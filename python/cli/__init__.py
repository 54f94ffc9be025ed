"""The ``tstream`` command line: one module per group of subcommands, ``main`` in :mod:`.app`."""

from __future__ import annotations

from .app import console, main

__all__ = ["console", "main"]
