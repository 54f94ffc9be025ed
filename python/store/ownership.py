"""A stream owns only what it wrote: where a new stream may be created.

Invariants:

* a stream is created only in a folder that holds nothing but tstream's own objects (none, or
  ``_tstream/`` left by a creation racing this one, which the journal's conditional create then
  decides), so nothing a user put there can later look like the stream's and be deleted by
  orphan cleanup (``vacuum(orphans=True)``);
* a stream is never created inside another stream's ``_tstream/`` or a segment folder
  (``data/<number>/``): the outer stream's maintenance lists those folders.

Cost: one listing of the root (and, only for a root whose path holds ``data/<number>``, one
listing of the would-be outer stream's ``_tstream/``).
"""

from __future__ import annotations

import posixpath

from ..errors import InvalidPathError
from . import layout
from .storage import Store

#: How many foreign names a refusal lists.
NAMED = 5

REMEDY = "create the stream in an empty or new folder (or move those files elsewhere first)"


def check_creatable(store: Store) -> None:
    """Refuse to create a stream at ``store``'s root if the folder holds files that are not
    tstream's, or lies inside another stream's metadata or data folders."""
    _check_not_nested(store)
    names = store.list()
    foreign = [n for n in names if n != layout.META and not (n == layout.DATA and layout.META in names)]
    if foreign:
        shown = ", ".join(foreign[:NAMED]) + (f" and {len(foreign) - NAMED} more" if len(foreign) > NAMED else "")
        raise InvalidPathError(
            f"{store.display_url} already holds files that are not a tstream stream's ({shown}): a stream "
            f"created there could later take them for its own; {REMEDY}")


def _check_not_nested(store: Store) -> None:
    parts = [p for p in store.root.split("/") if p]
    if layout.META in parts:
        raise InvalidPathError(
            f"{store.display_url} is inside a stream's {layout.META}/ folder, which only tstream writes; "
            "create the stream outside any stream's folder")
    for i in range(len(parts) - 1):
        if parts[i] == layout.DATA and parts[i + 1].isdigit():
            outer = "/" * store.root.startswith("/") + "/".join(parts[:i])
            try:
                held = store.backend.list_names(posixpath.join(outer, layout.META))
            except FileNotFoundError:
                held = []
            if held:
                raise InvalidPathError(
                    f"{store.display_url} is inside the data folder of the stream at {outer}, whose maintenance "
                    "lists that folder; create the stream outside any stream's folder")
