"""Compaction's policy: the ``compaction`` config, when a compaction is due, and which runs it merges.

Invariant: choosing what to merge is pure (pieces in, groups out, no store calls), so every
choice is testable without a store. Automatic merges are size-tiered (a binary counter of base
``min``): ``min`` small chunks make a level-1 macro-chunk, ``min`` level-``L`` ones a
level-``L+1`` one, up to ``target`` bytes; so each record is rewritten about
``log_min(target / chunk size)`` times and a segment holds at most about ``(min - 1)`` pieces
per level plus the ones at ``target``. A full compaction packs every run below ``target / 2``.
Whether one is due is read from the state alone (:func:`due`: zero reads).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..journal.compaction_state import segment_summaries
from ..journal.entries import Chunk
from ..journal.state import StreamState
from ..keys import COMPACTION_DEFAULT
from ..maps.macromap import SPAN, Macro
from ..policytext import policy_parts
from ..units import size_bytes

#: Automatic compaction is considered on every this-many-th journal position (amortized O(1)).
COMPACT_EVERY = 16
#: The level of a piece that is never merged (already large).
NEVER_MERGED = 1 << 30



@dataclass(frozen=True)
class CompactionPolicy:
    """Parsed ``compaction`` config: macro-chunk ``target`` bytes, ``min`` pieces per merge."""

    target: int = 128 << 20
    min: int = 16

    @classmethod
    @functools.lru_cache(maxsize=64)  # parsed on data commits; the text rarely changes
    def parse(cls, text: str | None) -> CompactionPolicy | None:
        """None when compaction is off; the default policy when ``text`` is None."""
        if text is None:  # a stream created before compaction existed names none
            text = COMPACTION_DEFAULT
        if text.strip().lower() in ("off", "false", "none", "no"):
            return None
        vals: dict[str, int] = {}
        for part in policy_parts(text):
            key, value = part.key, part.value
            if key == "target" and part.sep and (size := size_bytes(value)) is not None:
                vals["target"] = size
            elif key == "min" and part.sep and value.strip().isdigit() and int(value) >= 2:
                vals["min"] = int(value)
            elif key in ("on", "true", "yes") and not part.sep:
                continue
            else:
                raise ConfigError(
                    f"compaction={text!r}: bad part {part.text.strip()!r}; use target=<size like 128MB>,"
                    "min=<pieces per merge, 2 or more>, or off", option="compaction", value=text)
        if vals.get("target", 1 << 10) < 1 << 10:
            raise ConfigError(f"compaction={text!r}: target must be at least 1KB", option="compaction", value=text)
        return cls(**vals)


def due(state: StreamState, policy: CompactionPolicy) -> bool:
    """Whether some active segment has ``min`` small chunks pending: from the state, zero reads."""
    segs = segment_summaries(state)
    return any(g.chunks - (segs[g.id].chunks if g.id in segs else 0) >= policy.min for g in state.segments)


# -- choosing what to merge ------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """A run of a segment's records stored as one file: a small chunk or a macro-chunk."""

    chunk: Chunk  # the small chunk, or the whole macro-chunk as a view (floor 0)
    level: int  # 0: a small chunk; >= 1: a macro-chunk; NEVER_MERGED: never merged
    pos: int = -1  # journal position of a small chunk

    @property
    def first(self) -> int:
        return self.chunk.seq

    @property
    def end(self) -> int:
        return self.chunk.seq + self.chunk.rows

    @classmethod
    def of_macro(cls, seg: int, m: Macro, policy: CompactionPolicy) -> Piece:
        c = Chunk(seg=seg, path=m.path, rows=m.rows, bytes=m.bytes, seq=m.first, floor=m.floor, lo=m.lo, hi=m.hi,
                  sorted=m.sorted)
        return cls(c, NEVER_MERGED if m.floor or m.bytes >= policy.target // 2 else m.level)


def plan_groups(pieces: Sequence[Piece], policy: CompactionPolicy, *, full: bool, final: bool) -> list[list[Piece]]:
    """Split one bucket's pieces (in ``_seq`` order) into groups; a group of 2+ is one merge.

    ``full``: pack consecutive pieces below ``target / 2`` into as few groups of at most
    ``target`` bytes as fit. Otherwise size-tiered: ``min`` trailing groups of one level merge
    into one of the next level while they fit ``target``; ``final`` (a sealed segment, which
    gets no more chunks) also merges its trailing small chunks, however few.
    """
    def fits(ps: Sequence[Piece]) -> bool:
        return sum(p.chunk.bytes for p in ps) <= policy.target and sum(p.chunk.rows for p in ps) <= SPAN

    if full:
        out: list[list[Piece]] = []
        cur: list[Piece] = []
        for p in pieces:
            if p.level == NEVER_MERGED or p.chunk.bytes >= policy.target // 2:
                out += [cur] if cur else []
                out.append([p])
                cur = []
                continue
            if cur and not fits(cur + [p]):
                out.append(cur)
                cur = []
            cur.append(p)
        return out + ([cur] if cur else [])
    stack: list[tuple[int, list[Piece]]] = []
    for p in pieces:
        stack.append((p.level, [p]))
        while len(stack) >= policy.min:
            tail = stack[-policy.min:]
            level = tail[-1][0]
            members = [m for _, ms in tail for m in ms]
            if level == NEVER_MERGED or any(lv != level for lv, _ in tail) or not fits(members):
                break
            del stack[-policy.min:]
            stack.append((level + 1, members))
    if final:
        k = 0
        while k < len(stack) and stack[-1 - k][0] == 0:
            k += 1
        if k >= 2 and fits([m for _, ms in stack[-k:] for m in ms]):
            members = [m for _, ms in stack[-k:] for m in ms]
            del stack[-k:]
            stack.append((1, members))
    return [ms for _, ms in stack]


def level_of(p: Piece, policy: CompactionPolicy) -> int:
    small = p.chunk.bytes < policy.target // policy.min and p.chunk.rows <= SPAN // policy.min
    return 0 if small else NEVER_MERGED
