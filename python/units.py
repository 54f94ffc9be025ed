"""Byte sizes in config texts (``128MB``, ``64m``, ``1GiB``): the one parser, binary units as Spark's."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*$", re.IGNORECASE)
#: Binary, as in Spark's byte-size configs: ``64MB`` is 64 × 2**20 bytes.
BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def size_bytes(text: str) -> int | None:
    """Bytes of a size like ``500MB``, ``10g``, ``1GiB`` or ``4096``; None if ``text`` is not one."""
    m = _SIZE.match(text)
    if not m or (m.group(3) and m.group(3).lower() == "ib" and not m.group(2)):
        return None
    return int(float(m.group(1)) * BYTE_UNITS[m.group(2).lower()])
