"""``Stream.verify()`` / ``tstream fsck``: check every object a read may open, and say what repair can fix.

Invariant kept: verify only reads. It reports each problem with what is affected and a remedy
that exists; a problem is *repairable* when the object is derived from the journal (the head
and anchor hints, time-index nodes, sealed-map shards, epoch records and history chunks) and
can be rebuilt byte for byte (python/maintain/rebuild.py), or is a macro-map bucket the journal
determines (python/compaction/macro_rebuild.py); python/maintain/repair.py then writes it. What cannot be derived
is reported exactly: a missing chunk as its segment, ``_seq`` range and time range, with the
stream cut that truncates past it.

Costs: every live journal entry is read once (batched), every live chunk costs one listing per
segment folder (existence and size), one ranged read of its Parquet footer (concurrent) and,
where the footer is sound, a read and decode of the whole file, which checks every page against
its CRC32 (python/chunkfile/checksums.py; files written before page checksums decode without
that check); every written index node, shard version and epoch record one read.

``pages=False`` (``tstream fsck --footers-only``) skips the decode: chunk files cost their
footer's ranged read alone (O(files), not O(data), and no whole file in memory). It still finds
a missing, truncated, foreign or swapped file (size, rows and the footer's time statistics
against the journal's), but not a damaged page inside a file whose footer is sound: a read
finds that one (CorruptChunkError), and so does a full fsck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..compaction.gc import holds_its_records, replaced_by
from ..compaction.macro_rebuild import Expected, bucket_of_error, expected
from ..compaction.manifest import Manifest
from ..epochs.scaling import (
    EPOCH_CHUNK,
    decode_epoch,
    epoch_chunk_bytes,
    read_epoch,
)
from ..errors import CorruptMetadataError
from ..journal import seal
from ..journal.compaction_state import compact_parts, compacted_upto, replaced_gc_start, segment_summaries
from ..journal.crosscheck import Replayed, next_seqs, step_problem
from ..journal.entries import Chunk, Entry, decode_anchor
from ..journal.features import checksummed
from ..journal.journal import Journal
from ..journal.scale_records import EpochRecord, SealedRecord
from ..journal.state import StreamState, segment_number
from ..journal.summary import Summary
from ..journal.timeindex import FANOUT, Delta, decode_node, summary
from ..maps.macromap import MacroMap
from ..maps.sealed import ShardVersion, shard_of
from ..read.compacted import substitute
from ..read.file_checks import file_problems
from ..store import layout
from ..store.storage import Store
from ..timestamps import iso, physical
from .fixes import Fixes, ShardFix
from .fsck_checkpoints import check_checkpoints, first_base
from .fsck_groups import check_groups
from .fsck_report import Problem, Report, unbuildable
from .rebuild import node_counts, rebuild_epoch, rebuild_sealed

#: Metadata records read per batched call.
_BATCH = 256

Progress = Callable[[int, int], None]


class _Checker:
    def __init__(self, store: Store, progress: Progress | None, pages: bool = True) -> None:
        self.store = store
        self.pages = pages
        self.journal = Journal(store)
        self.progress = progress
        self.done = 0
        self.total = 0
        self.problems: list[Problem] = []
        self.checked: dict[str, int] = {}
        self.macro_fixes: dict[tuple[int, int], Expected] = {}  # (segment, bucket) -> the map repair writes
        self.listed: tuple[set[str], dict[str, int]] = (set(), {})  # the data folders chunks() listed, their files
        self.hinted: Entry | None = None  # the newest entry as the head hint copies it

    # -- helpers --------------------------------------------------------------------------------
    def _tick(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done))

    def _count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def _problem(self, kind: str, rel: str, message: str, repairable: bool, **details: Any) -> None:
        self.problems.append(Problem(kind, self.store.uri(rel), message, repairable, details))

    def _read_all(self, rels: list[str]) -> dict[str, bytes | None]:
        """Raw bytes of each object (None if missing), batched."""
        out: dict[str, bytes | None] = {}
        for i in range(0, len(rels), _BATCH):
            part = rels[i:i + _BATCH]
            out.update(zip(part, self.store.read_present(part)))
        return out

    # -- the newest state -----------------------------------------------------------------------
    def newest(self) -> Entry:
        try:
            hint: Entry | None = self.journal.log.decode(self.store.read(layout.HEAD), layout.HEAD)
        except FileNotFoundError:
            hint = None
            self._problem("head", layout.HEAD, f"head hint {self.store.uri(layout.HEAD)} is missing; `tstream repair` "
                          "rewrites it (readers find the newest entry without it)", True)
        except CorruptMetadataError as e:
            if e.path != self.store.uri(layout.HEAD):
                raise  # the hint is sound: an entry its state is built from is not (verify reports it)
            hint = None
            self._problem("head", layout.HEAD, f"head hint {self.store.uri(layout.HEAD)} is unreadable; "
                          "`tstream repair` rewrites it (readers find the newest entry without it)", True)
        self._count("hints")
        newest = self.journal.head(known=hint)
        self.hinted = hint if hint is not None and hint.pos == newest.pos else None
        if hint is not None and hint.pos > newest.pos:  # cannot happen with a sane store
            self._problem("head", layout.HEAD, f"head hint names position {hint.pos} beyond the journal "
                          f"({newest.pos}); `tstream repair` rewrites it", True)
        return newest

    def anchor(self, state: StreamState) -> None:
        try:
            raw = self.store.read(layout.ANCHOR)
        except FileNotFoundError:
            if state.meta_gc_pos > 1:
                self._problem("anchor", layout.ANCHOR, f"anchor {self.store.uri(layout.ANCHOR)} is missing although "
                              "journal entries were collected; `tstream repair` rewrites it", True)
            return
        self._count("hints")
        try:
            pos = decode_anchor(raw)
        except (ValueError, KeyError, TypeError) as e:
            self._problem("anchor", layout.ANCHOR, f"anchor {self.store.uri(layout.ANCHOR)} is unreadable ({e}); "
                          "`tstream repair` rewrites it", True)
            return
        if pos > state.pos or (pos and not self.store.exists(layout.entry(pos))):
            self._problem("anchor", layout.ANCHOR, f"anchor {self.store.uri(layout.ANCHOR)} names position {pos}, "
                          "which is not a live journal entry; `tstream repair` rewrites it", True)

    # -- journal entries ------------------------------------------------------------------------
    def entries(self, state: StreamState, head_raw: bytes | None) -> dict[int, Entry]:
        """Decode every live entry (0, then ``meta_gc_pos..pos``); report the bad ones. Entries
        below ``gc_pos`` may already be gone (GC deletes metadata one run behind)."""
        first = max(state.meta_gc_pos, 1)
        positions = [0] + list(range(first, state.pos + 1))
        out: dict[int, Entry] = {}
        built = first_base(self.store, state)  # format v6: the state each entry's change applies to
        for i in range(0, len(positions), _BATCH):
            part = positions[i:i + _BATCH]
            raws = self._read_all([layout.entry(p) for p in part])
            for p in part:
                rel = layout.entry(p)
                raw = raws[rel]
                self._count("journal entries")
                self._tick()
                head_copy = head_raw is not None and p == state.pos
                remedy = ("`tstream repair` restores it from the head hint, which holds a copy" if head_copy
                          else "no copy of it exists: its data stays readable through the index where "
                               "flushed; to be rid of it, truncate the stream past it (`tstream truncate`)")
                if raw is None and 0 < p < state.gc_pos:
                    continue  # garbage collection deletes these one run late: not a loss
                if raw is None:
                    self._problem("entry", rel, f"journal entry {self.store.uri(rel)} is missing; {remedy}",
                                  head_copy, pos=p)
                    continue
                d: dict[str, Any] = {}
                try:
                    d = Entry.parse(raw, path=self.store.uri(rel))
                    if d["pos"] != p:
                        raise CorruptMetadataError(f"it says position {d['pos']}", path=rel)
                    if "change" in d and p - 1 not in built:
                        continue  # sound itself; the state before it is not readable (collected, or damaged)
                    e = self.journal.log.decode(raw, rel, built)
                except CorruptMetadataError as err:
                    self._problem("entry", rel, f"journal entry {self.store.uri(rel)} is unreadable "
                                  f"({str(err).split(';')[0]}); {remedy}", head_copy, pos=p)
                    continue
                if "change" in d and self._contradicts(p, d, built[p - 1], e.state):
                    continue  # no state after it is known: nothing is rebuilt from it
                out[p] = e
                built[p] = e.state
                if head_copy and raw != head_raw and "change" in Entry.parse(head_raw or b"", path=layout.HEAD):
                    # both parse: the entry, created once by its commit, is what the hint copies
                    self._problem("head", layout.HEAD, f"head hint {self.store.uri(layout.HEAD)} differs from "
                                  f"the newest journal entry {self.store.uri(rel)}, which it copies; readers may "
                                  "use it: `tstream repair` rewrites it from the entry", True)
        return out

    def _contradicts(self, p: int, d: dict[str, Any], before: StreamState, after: StreamState) -> bool:
        """Whether entry ``p`` (stored ``d``) contradicts the state built before it (the chunk
        check of :mod:`~pyspark_tstream.journal.crosscheck`), reported naming the object at fault.
        An entry committed into the slot of a lost one (a committer that read the journal before
        the loss) parses and applies, but the entries after it were built on the lost one: a state
        built through it is no committed state, and repair must not rewrite checkpoints from it."""
        seen = Replayed()
        seen.add_entry(p, d["change"], d)
        found = step_problem(next_seqs(before), next_seqs(after), seen.steps[0].chunks)
        if found is None:
            return False
        at = p if found[0] == "entry" else p - 1
        rel = layout.entry(at)
        self._problem("entry", rel, f"journal entry {self.store.uri(rel)} contradicts the entries after it "
                      f"(entry {p}: {found[1]}): it was damaged, or committed into the slot of a lost entry; "
                      "the states after it cannot be rebuilt from the journal, so nothing is rewritten from "
                      "them: truncate the stream past it (`tstream truncate`)", False, pos=at)
        return True

    # -- index nodes ----------------------------------------------------------------------------
    def index(self, state: StreamState, entries: dict[int, Entry]) -> dict[tuple[int, int], bytes]:
        """Check every written index node against the journal; return rebuildable contents."""
        counts = node_counts(state)
        rebuilt: dict[tuple[int, int], bytes] = {}
        last_item: dict[tuple[int, int], Summary | None] = {}
        for p, e in entries.items():
            last_item[(0, p)] = summary(e)
        for level in range(1, len(counts) + 1):
            lo = state.meta_gc_pos // FANOUT if level == 1 else 0
            nodes = list(range(lo, counts[level - 1]))
            raws = self._read_all([layout.index_node(level, n) for n in nodes])
            for n in nodes:
                rel = layout.index_node(level, n)
                self._count("index nodes")
                self._tick()
                children = range(n * FANOUT, (n + 1) * FANOUT)
                kids = [last_item.get((level - 1, c)) for c in children]
                known = [k for k in kids if k is not None]
                expected: dict[str, Any] | None = None
                if len(known) == len(kids):
                    items = [k if level == 1 else k._replace(id=c) for c, k in zip(children, known)]
                    expected = {"level": level, "node": n, "items": items}
                    if level == 1:
                        expected["entries"] = [entries[c].delta_json() for c in children]
                raw = raws[rel]
                actual: Any = None
                held: dict[int, int] = {}
                if raw is not None:
                    try:
                        actual = decode_node(raw, self.store.uri(rel), level, deltas=True,
                                             sealed=checksummed(state.features))
                        # a flush copies only the deltas of entries kept, so match them by position
                        held = {d.pos: j for j, d in enumerate(actual.pop("deltas", []))}
                        if len(actual["items"]) != FANOUT:
                            actual = None
                    except CorruptMetadataError:
                        actual = None
                if actual is not None:
                    last_item[(level, n)] = actual["items"][-1]._replace(id=n)
                elif expected is not None:
                    last_item[(level, n)] = expected["items"][-1]._replace(id=n)
                if expected is not None and actual == expected:
                    continue
                if raw is None and level == 1 and n < state.gc_pos // FANOUT:
                    continue  # collected one run late, like its entries
                # some of its entries were collected: check the part that can be checked
                if expected is None and actual is not None and (
                        level > 1 or all(actual["items"][i] == summary(entries[c]) and c in held
                                         and actual["entries"][held[c]] == entries[c].delta_json()
                                         for i, c in enumerate(children) if c in entries)):
                    continue
                what = "missing" if raw is None else ("unreadable" if actual is None else
                                                      "different from the journal")
                if expected is not None:
                    rebuilt[(level, n)] = seal.encode(expected, checksummed(state.features))
                    self._problem("node", rel, f"index node {self.store.uri(rel)} is {what}; the journal "
                                  "holds its content: `tstream repair` rebuilds it", True, level=level, node=n)
                else:
                    self._problem("node", rel, f"index node {self.store.uri(rel)} is {what} and the journal "
                                  "entries it summarizes are not all readable, so it cannot be rebuilt; "
                                  "reads that search this part of the history fail: truncate the stream "
                                  "past it (`tstream truncate`)", False, level=level, node=n)
        return rebuilt

    # -- chunks ---------------------------------------------------------------------------------
    def chunks(self, state: StreamState, entries: dict[int, Entry]) -> None:
        """Every chunk of a readable record exists with its recorded size, rows and times, and (with
        ``pages``) its pages decode, matching their CRC32s where it has them."""
        deltas: list[Delta] = []
        for p in range(state.head_pos, state.pos + 1):
            if p in entries:
                deltas.append(Delta.of(entries[p]))
            elif p == state.pos and self.hinted is not None:  # lost or torn: the head hint copies it
                deltas.append(Delta.of(self.hinted))
            else:  # an unreadable entry (reported): its delta may be in a level-1 node
                try:
                    deltas += self.journal.deltas(state, p, p)
                except (CorruptMetadataError, FileNotFoundError):
                    continue
        live = [c for d in deltas for c in d.chunks if c.hi > state.head_tso]
        sizes: dict[str, int] = {}  # macro-chunks live in their segment's data folder too
        folders = {c.path.rsplit("/", 1)[0] for c in live}
        # a segment's macro-chunks are in its own folder, where none of its raw chunks may be: a
        # shared file lives in its first segment's folder, a chunk re-routed whole to the segment
        # a merge made stays in its sealed segment's
        folders |= {layout.data_folder(segment_number(c.seg)) for c in live}
        for folder in sorted(folders):
            sizes.update((f"{folder}/{name}", size) for name, size in self.store.list_sizes(folder).items())
        self.listed = (folders, sizes)
        # compacted records live in macro-chunks now (their small files go at vacuum): check
        # the files a read would open, never report a replaced file as lost
        planned = self.macro_map(state, deltas, live, sizes)
        verdicts = self._footers(planned, sizes, {})
        unreadable = {c.path for c, bad in verdicts.values() if bad is not None and c.floor == 0 and c.path in sizes}
        if unreadable:  # plan around them where the files they replaced are all still there
            planned = self.macro_map(state, deltas, live, sizes, frozenset(unreadable))
            verdicts = self._footers(planned, sizes, verdicts)
        by_file: dict[str, list[Chunk]] = {}
        for c in planned:
            by_file.setdefault(c.path, []).append(c)
        for path, views in by_file.items():
            c, bad = verdicts[path]
            self._count("chunks")
            self._tick()
            if bad is not None:
                # a shared file held slices of several segments: each one's records are lost
                for v in (views if c.shared else [c]):
                    self._chunk_problem(v, bad)

    def _footers(self, chunks: list[Chunk], sizes: dict[str, int],
                 known: dict[str, tuple[Chunk, str | None]]) -> dict[str, tuple[Chunk, str | None]]:
        """``known`` and, for each file of ``chunks`` not in it, what is wrong with it (None:
        nothing): missing, not Parquet, other rows, bytes or times than the journal's, or (with
        ``pages``) a page that does not decode or match its CRC32."""
        return {**known, **file_problems(self.store, [c for c in chunks if c.path not in known], sizes,
                                         pages=self.pages)}

    def macro_map(self, state: StreamState, deltas: list[Delta], raw: list[Chunk],
                  sizes: dict[str, int], unreadable: frozenset[str] = frozenset()) -> list[Chunk]:
        """The files a read of ``raw`` opens. When the stored macro map is unreadable or names
        a file that is gone (or ``unreadable``), plan against the map the journal determines
        instead, report each bucket that differs from it (repair rewrites it), and return that
        plan: a replaced file or a stale map entry is then never reported as lost records."""
        broken: CorruptMetadataError | None = None
        try:  # exact: a lost version the state names is reported (a read searches the bucket instead)
            live = substitute(self.store, state, raw, MacroMap(self.store, exact=True))
        except CorruptMetadataError as e:
            broken, live = e, []
        gone = {c.seg for c in live if (c.path not in sizes or c.path in unreadable)
                and (c.floor == 0 or c.seq < compacted_upto(state, c.seg))}
        if broken is None and not gone:
            return live
        want = expected(state, deltas, lambda rel: rel in sizes and rel not in unreadable)
        segs = list(segment_summaries(state))
        where = bucket_of_error(broken, segs) if broken is not None else None
        if broken is not None and where is None:  # not a bucket version we can place: say what it is
            self._problem("macro map", broken.path.split(self.store.display_url.rstrip("/") + "/")[-1],
                          str(broken), False)
        affected = gone | ({where[0]} if where else set())
        for seg, bucket, why in want.damaged(self.store, affected, where, broken):
            rel = layout.macro_bucket_folder(segment_number(seg), bucket)
            self._problem("macro map", rel, f"macro map of segment {seg} bucket {bucket} ({self.store.uri(rel)}) "
                          f"{why}: reads of its compacted records fail; `tstream repair` rebuilds it from "
                          "the journal", True, segment=seg, bucket=bucket)
            self.macro_fixes[(seg, bucket)] = want
        self._count("macro map buckets", len({k for k in want.entries.keys() | want.partial if k[0] in affected}))
        return substitute(self.store, state, raw, maps=want)

    def _chunk_problem(self, c: Chunk, bad: str) -> None:
        last = c.seq + c.rows - 1
        self._problem(
            "chunk", c.path,
            f"chunk {self.store.uri(c.path)} {bad}: records of segment {c.seg} with _seq {c.seq}..{last} "
            f"(_tso {c.lo}..{c.hi}, {iso(physical(c.lo))} .. {iso(physical(c.hi))}) cannot be read. "
            f"Put the file back if you have a copy; otherwise truncate the stream past them: "
            f"tstream truncate {self.store.display_url} --before {iso(physical(c.hi) + 1)} (this drops "
            "every record up to that time)", False,
            segment=c.seg, first_seq=c.seq, last_seq=last, first_tso=c.lo, last_tso=c.hi,
            before=iso(physical(c.hi) + 1))

    # -- compaction manifests -------------------------------------------------------------------
    def manifests(self, state: StreamState, entries: dict[int, Entry]) -> dict[str, Manifest]:
        """The manifest of every compaction not yet collected exists and names its macro-chunk:
        vacuum reads it to delete the files the compaction replaced. Returns the manifests
        repair rebuilds from the journal (naming nothing when the macro-chunk is gone or unreadable)."""
        first = replaced_gc_start(state)
        parts = [p for pos, e in sorted(entries.items()) if pos >= first and e.op == "compact"
                 for p in compact_parts(e.info) if p.manifest]
        raws = self._read_all([p.manifest for p in parts])
        bad = []
        for p in parts:
            self._count("compaction manifests")
            raw = raws.get(p.manifest)
            if Manifest.read(raw, p.macro) is None:
                bad.append((p, "missing" if raw is None else "unreadable"))
        named = replaced_by([Delta.of(e) for _, e in sorted(entries.items())], {p.macro for p, _ in bad}) \
            if bad else {}
        rebuilt = {}
        for p, what in bad:
            kept = holds_its_records(self.store, p)  # else its records are only in what it replaced
            gone = [r for r in named.get(p.macro, []) if r != p.macro]
            if what == "missing" and gone and not any(self._present(r) for r in gone):
                # a vacuum deleted what it replaced, then the manifest, and stopped before committing
                # its progress: the next vacuum records it (a lost macro-chunk is a chunk problem; a
                # compaction of slices alone names no file, so its lost manifest is still rebuilt)
                self._count("compaction manifests collected")
                continue
            replaced = tuple(named.get(p.macro, [])) if kept else ()
            rebuilt[p.manifest] = Manifest(p.seg, p.macro, p.first, p.end, replaced)
            self._problem("manifest", p.manifest, f"compaction manifest {self.store.uri(p.manifest)} is "
                          f"{what}: reads are not affected, but vacuum cannot delete the files that compaction "
                          f"replaced; `tstream repair` rebuilds it from the journal", True,
                          segment=p.seg, macro=p.macro)
        return rebuilt

    def _present(self, rel: str) -> bool:
        folders, sizes = self.listed
        return rel in sizes if rel.rsplit("/", 1)[0] in folders else self.store.exists(rel)

    # -- epochs and sealed shards ---------------------------------------------------------------
    def epochs(self, state: StreamState, entries: dict[int, Entry]) -> tuple[dict[int, bytes], list[EpochRecord]]:
        """Epoch records 1..epoch decode; returns rebuildable ones and the records read."""
        rebuilt: dict[int, bytes] = {}
        records: list[EpochRecord] = []
        pending = state.pending_epoch.epoch if state.pending_epoch else None
        wanted = [e for e in range(1, state.epoch + 1) if e != pending]
        raws = self._read_all([layout.epoch_record(e) for e in wanted])
        for ep in wanted:
            rel = layout.epoch_record(ep)
            self._count("epoch records")
            self._tick()
            raw = raws[rel]
            rec: EpochRecord | None = None
            if raw is not None:
                try:
                    rec = decode_epoch(raw, self.store.uri(rel), ep)
                except CorruptMetadataError:
                    rec = None
            if rec is not None:
                records.append(rec)
                continue
            what = "missing" if raw is None else "unreadable"
            fixed = rebuild_epoch(ep, entries)
            if fixed is not None:
                rebuilt[ep] = fixed
                records.append(EpochRecord.from_json(seal.unseal(fixed)))
                self._problem("epoch", rel, f"epoch record {self.store.uri(rel)} is {what}; the journal "
                              "holds its content: `tstream repair` rebuilds it", True, epoch=ep)
            else:
                self._problem("epoch", rel, f"epoch record {self.store.uri(rel)} is {what} and the journal "
                              "entries around that scale were collected, so it cannot be rebuilt; sources "
                              "that start before that epoch cannot follow it: start them later", False,
                              epoch=ep)
        return rebuilt, records

    def epoch_chunks(self, state: StreamState, records: list[EpochRecord]) -> dict[int, bytes]:
        """Each full epoch history chunk holds exactly its records; returns rebuildable ones."""
        pending = state.pending_epoch.epoch if state.pending_epoch else None
        full = [k for k in range((state.epoch + 1) // EPOCH_CHUNK)
                if pending is None or pending > (k + 1) * EPOCH_CHUNK - 1]
        if not full:
            return {}
        by_epoch = {r.epoch: r for r in records}
        by_epoch.setdefault(0, read_epoch(self.store, state, 0))
        raws = self._read_all([layout.epoch_chunk(k) for k in full])
        rebuilt: dict[int, bytes] = {}
        for k in full:
            rel = layout.epoch_chunk(k)
            self._count("epoch history chunks")
            self._tick()
            want = [by_epoch.get(e) for e in range(k * EPOCH_CHUNK, (k + 1) * EPOCH_CHUNK)]
            raw = raws[rel]
            try:
                got = seal.unseal(raw)["records"] if raw is not None else None
            except (ValueError, TypeError, KeyError):
                got = "unreadable"
            if got == [r.to_json() if r is not None else None for r in want]:
                continue
            what = "missing" if raw is None else "unreadable" if got == "unreadable" else \
                "different from the epoch records"
            held = [r for r in want if r is not None]
            if len(held) == len(want):
                rebuilt[k] = epoch_chunk_bytes(k, held, checksummed(state.features))
                self._problem("epoch chunk", rel, f"epoch history chunk {self.store.uri(rel)} is {what}; "
                              "the epoch records hold its content: `tstream repair` rewrites it", True, chunk=k)
            else:
                self._problem("epoch chunk", rel, f"epoch history chunk {self.store.uri(rel)} is {what} and "
                              "some of its epoch records are lost too (reported above); sources that start "
                              "before those epochs cannot follow them: start them later", False, chunk=k)
        return rebuilt

    def shards(self, state: StreamState, epoch_records: Iterable[EpochRecord],
               entries: dict[int, Entry]) -> dict[int, ShardFix]:
        """Sealed-map shards decode and hold every sealed segment; returns per shard what
        repair rewrites: unreadable versions, records to merge back, the head hint."""
        sealed_ids = {i for rec in epoch_records for i in rec.sealed}
        sealed_ids -= {r.id for r in state.pending_sealed}
        shards = sorted({shard_of(i) for i in sealed_ids} |
                        {int(n) for n in self.store.list(layout.SEALED) if n.isdigit()})
        plans: dict[int, ShardFix] = {}
        for shard in shards:
            self._count("sealed shards")
            self._tick()
            folder = layout.sealed_folder(shard)
            names = self.store.list(folder)
            versions = sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())
            plan = ShardFix()
            prev: Mapping[str, SealedRecord] = {}
            have: set[str] = set()
            for v in versions:
                rel = layout.sealed_version(shard, v)
                try:
                    cur = ShardVersion.decode(self.store.read(rel), self.store.uri(rel))
                    if cur.v != v:
                        raise CorruptMetadataError(f"it says version {cur.v}", path=rel)
                    prev = cur.segments
                    have |= set(prev)
                except (CorruptMetadataError, FileNotFoundError) as e:
                    # later versions hold all it held; a copy of its predecessor keeps the chain
                    plan.versions[v] = ShardVersion(shard, v, prev)
                    self._problem("shard", rel, f"sealed-segment shard version {self.store.uri(rel)} is "
                                  f"unreadable ({e}); `tstream repair` rewrites it", True, shard=shard, version=v)
            try:
                ShardVersion.decode(self.store.read(layout.sealed_head(shard)), layout.sealed_head(shard))
            except FileNotFoundError:
                pass
            except CorruptMetadataError:
                plan.head = True
                self._problem("shard", layout.sealed_head(shard),
                              f"sealed-shard head hint {self.store.uri(layout.sealed_head(shard))}"
                              " is unreadable; `tstream repair` rewrites it", True, shard=shard)
            missing = sorted(i for i in sealed_ids if shard_of(i) == shard and str(segment_number(i)) not in have)
            if missing:
                records = rebuild_sealed(missing, entries)
                if records is not None:
                    plan.records = records
                    self._problem("shard", folder, f"sealed-segment shard {self.store.uri(folder)} lacks "
                                  f"sealed segment(s) {missing}; the journal holds them: `tstream repair` "
                                  "adds them", True, shard=shard, missing=missing)
                else:
                    self._problem("shard", folder, f"sealed-segment shard {self.store.uri(folder)} lacks "
                                  f"sealed segment(s) {missing} and the journal entries of their sealing were "
                                  "collected; reads of those segments' history fail: truncate the stream "
                                  "past their sealing (`tstream truncate`)", False, shard=shard, missing=missing)
            if plan:
                plans[shard] = plan
        return plans


def verify(store: Store, progress: Progress | None = None, *, pages: bool = True) -> tuple[Report, Fixes]:
    """Check the stream at ``store``; returns the report and what
    :func:`~pyspark_tstream.maintain.repair.repair` can rewrite. ``pages=False`` checks chunk
    files from their footers alone (see the module docstring: a damaged page goes unseen)."""
    ck = _Checker(store, progress, pages)
    try:
        newest = ck.newest()
    except CorruptMetadataError as e:
        return _unbuildable(ck, e)
    state = newest.state
    ck.total = (state.pos - max(state.meta_gc_pos, 1) + 2) + state.chunks + state.epoch
    ck.anchor(state)
    head_raw: bytes | None = None
    if ck.hinted is not None:  # a copy repair may restore from: it decoded on the state before it and
        # passed the checks a read makes (its change against its chunks); an edit they miss stays unseen
        try:
            head_raw = store.read(layout.HEAD)
            if Entry.parse(head_raw, path=layout.HEAD)["pos"] != state.pos:
                head_raw = None
        except (FileNotFoundError, CorruptMetadataError):
            head_raw = None
    entries = ck.entries(state, head_raw)
    checkpoints = check_checkpoints(store, state, entries, ck._problem, ck._count)
    nodes = ck.index(state, entries)
    ck.chunks(state, entries)
    manifests = ck.manifests(state, entries)
    epochs, records = ck.epochs(state, entries)
    epoch_chunks = ck.epoch_chunks(state, records)
    shards = ck.shards(state, records, entries)
    groups = check_groups(store, ck._problem, ck._count, checksummed(state.features))
    report = Report(url=store.display_url, position=state.pos, checked=ck.checked, problems=ck.problems,
                    pages=pages)
    fixes = Fixes(newest=newest, head=head_raw, nodes=nodes, epochs=epochs, epoch_chunks=epoch_chunks,
                  shards=shards, macros=ck.macro_fixes, manifests=manifests, groups=groups,
                  checkpoints=checkpoints)
    return report, fixes


def _unbuildable(ck: _Checker, e: CorruptMetadataError) -> tuple[Report, Fixes]:
    """The report when no newest state can be built: the object ``e`` names (an entry lost or torn
    between the newest checkpoint and the head, or a checkpoint nothing older rebuilds) stops
    every read and commit, and nothing else holds what it held."""
    newest = ck.journal.log.newest_stored()
    rel = e.path.removeprefix(ck.store.display_url.rstrip("/") + "/")
    ck._count("journal entries")
    ck._problem(*unbuildable(rel, e), False, fatal=True)
    return Report(url=ck.store.display_url, position=-1 if newest is None else newest, checked=ck.checked,
                  problems=ck.problems, pages=ck.pages), Fixes(newest=None, head=None)


__all__ = ["Problem", "Report", "verify"]
