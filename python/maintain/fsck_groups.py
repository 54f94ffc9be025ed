"""``fsck`` of the consumer groups: each group's head hint and newest version decode.

One job: check consumer groups and say what ``repair`` restores (a version from its head's copy,
a head hint from the newest version). A group whose newest version is lost with no copy is
reported with the command that starts a new group where it was.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CorruptMetadataError, GroupNotFoundError
from ..maps.grouplog import GroupLog, GroupState
from ..store import layout
from ..store.storage import Store
from .fsck_checkpoints import Problem


def check_groups(store: Store, problem: Problem, count: Callable[[str], None], sealed: bool) -> dict[str, bytes]:
    """Each consumer group's head hint and newest version decode; returns versions that
    repair restores from the head's copy (``sealed``: the stream declares checksums)."""
    restore: dict[str, bytes] = {}
    for name in store.list(layout.GROUPS):
        count("consumer groups")
        log = GroupLog(store, name, sealed=sealed)
        head_raw: bytes | None = None
        try:
            head_raw = store.read(log.head_path)
            head = GroupState.decode(head_raw, path=store.uri(log.head_path))
        except FileNotFoundError:
            head = None
        except CorruptMetadataError:
            head = None
            problem("group", log.head_path, f"consumer-group head hint {store.uri(log.head_path)} "
                          "is unreadable; `tstream repair` rewrites it (readers search the versions "
                          "without it)", True, group=name)
        try:
            newest = log.head()
        except (CorruptMetadataError, GroupNotFoundError) as e:
            rel = e.path.removeprefix(store.display_url + "/") if isinstance(e, CorruptMetadataError) \
                else log.head_path
            copy = head is not None and rel == log.version_path(head.pos)
            if copy and head_raw is not None:
                restore[rel] = head_raw
            problem("group", rel, f"consumer-group record {store.uri(rel)} is unreadable; "
                          + ("`tstream repair` restores it from the group's head copy" if copy else
                             f"no copy exists: start a new group where this one was (`tstream group "
                             f"{store.display_url} create NAME --start ID`)"), copy, group=name)
            continue
        if head is None or head.pos != newest.pos:
            restore[log.head_path] = newest.encode(sealed)
        elif head_raw is not None:  # the hint stood in for the newest version: check the version too
            rel = log.version_path(newest.pos)
            (raw,) = store.read_present([rel])
            if raw != head_raw:
                what = "missing" if raw is None else "different from the head hint that copies it (damaged or edited)"
                try:
                    if raw is not None:
                        GroupState.decode(raw, path=store.uri(rel))
                except CorruptMetadataError as e:
                    what = f"unreadable ({e.__cause__ or e})"
                restore[rel] = head_raw
                problem("group", rel, f"consumer-group record {store.uri(rel)} is {what}; `tstream repair` "
                              "restores it from the group's head copy", True, group=name)
    return restore
