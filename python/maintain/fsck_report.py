"""What fsck reports: each problem found, and the report of one check
(:func:`~pyspark_tstream.maintain.fsck.verify`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptMetadataError
from ..store import layout


@dataclass
class Problem:
    """One thing wrong: what, where, and whether
    :func:`~pyspark_tstream.maintain.repair.repair` can rebuild it."""

    kind: str  # head, anchor, entry, node, chunk, shard, epoch, macro map, manifest, group, checkpoint
    path: str
    message: str
    repairable: bool
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    """What :func:`~pyspark_tstream.maintain.fsck.verify` checked and found; ``ok`` when nothing is wrong."""

    url: str
    position: int
    checked: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    #: Whether chunk pages were decoded and checked (False: ``footers_only``, footers alone).
    pages: bool = True

    @property
    def ok(self) -> bool:
        """No problems found (or, after repair, none left)."""
        return not self.problems

    def summary(self) -> str:
        """What was checked and each problem, as text for humans."""
        counts = ", ".join(f"{v} {k}" for k, v in self.checked.items())
        head = f"{self.url} at journal position {self.position}: checked {counts}"
        if not self.pages:
            head += " (chunk footers only: pages not decoded)"
        if self.ok:
            return head + "; no problems"
        lines = [head + f"; {len(self.problems)} problem(s):"]
        lines += [f"  [{p.kind}] {p.message}" for p in self.problems]
        return "\n".join(lines)


def unbuildable(rel: str, e: CorruptMetadataError) -> tuple[str, str, str]:
    """``(kind, rel, message)`` of the object ``e`` names when no newest state can be built
    without it (see :func:`~pyspark_tstream.maintain.fsck.verify`): not repairable."""
    if not rel.startswith(layout.JOURNAL):
        return "checkpoint", rel, f"{e}; `tstream repair` cannot rebuild it: put the object back from a backup"
    cause = e.__cause__
    what = "missing" if "it is missing" in str(e) else \
        f"unreadable ({type(cause).__name__}: {cause})" if cause is not None else f"unreadable ({str(e).split(';')[0]})"
    return "entry", rel, (
        f"journal entry {e.path} is {what}: the stream state after it is rebuilt from its change, which nothing "
        "else holds (the index node that copies it keeps only its records), so no read or commit can pass it. "
        "Put the object back from a backup or snapshot of the store; `tstream repair` cannot rebuild it")
