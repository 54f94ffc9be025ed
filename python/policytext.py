"""Policy texts in a stream's config (``age=7d,size=10GB``): the one splitter into ``key=value`` parts.

The ``retention``, ``scaling`` and ``compaction`` parsers share it, so a part is read the same
way everywhere: split on commas, then on the first separator; the key stripped and lower-cased,
the value left as written (each parser reads its own values and words its own errors).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """One comma-separated part of a policy text."""

    text: str  # the part as written, for error messages and bare values (``7d``, ``off``)
    key: str  # before the separator (the whole part without one), stripped and lower-cased
    sep: bool  # whether the part has a separator
    value: str  # after the separator, as written ("" without one)


def policy_parts(text: str, seps: str = "=") -> list[Part]:
    """The parts of ``text``, each split at the first of ``seps`` it holds."""
    out = []
    for part in text.split(","):
        cut = min((i for i in (part.find(s) for s in seps) if i >= 0), default=-1)
        key, value = (part, "") if cut < 0 else (part[:cut], part[cut + 1:])
        out.append(Part(part, key.strip().lower(), cut >= 0, value))
    return out
