"""docs/protocol.md names every object a stream holds: a stream exercised through the public API
(a first write, appends, group commit, scales, compaction, checkpoints, consumer groups,
truncation, vacuum) is walked, and each file under its folder must match a path pattern of the
protocol's object-kind table (§15). A new kind of object fails here until the spec names it.
The same walk checks §16's checksums: every metadata object a new stream writes is sealed."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from helpers import ROOT
from pyspark_tstream.api.groups import Group
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.journal import seal
from pyspark_tstream.journal.state import StreamState
from pyspark_tstream.store.storage import Store
from pyspark_tstream.write.group import CONTENDED_COMMITS, CROWD, Part

PROTOCOL = ROOT / "docs" / "protocol.md"
SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64())])


def _kinds() -> dict[str, re.Pattern[str]]:
    """Kind name to the path pattern §15's table gives (``<...>`` placeholders match one name)."""
    text = PROTOCOL.read_text()
    table = text[text.index("## 15. Object kinds"):text.index("## 16.")]
    out = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[1].startswith("`"):
            continue
        path = cells[1].split("`")[1]
        out[cells[0]] = re.compile("^" + re.sub(r"<[^>]+>", "[^/]+", re.escape(path).replace(r"\<", "<")
                                               .replace(r"\>", ">")) + "$")
    return out


def _batch(i: int, rows: int = 40) -> pa.Table:
    return pa.table({"k": [f"k{j % 7}" for j in range(rows)], "n": list(range(i * rows, (i + 1) * rows))},
                    schema=SCHEMA)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _exercised(root: Path) -> dict[str, bytes]:
    """Every file the stream at ``root`` held at some point of the exercise (objects that
    ``vacuum`` or a fold delete included), with its bytes then."""
    url = f"file://{root}"
    seen: dict[str, bytes] = {}
    s, _ = Stream.for_write(Store(url), SCHEMA, config={"segments": 1, "compaction": "off"}, key="k")
    for i in range(40):  # index nodes (one per 32 positions), checkpoints
        s.append(_batch(i), key="k", writer_id="w", batch_id=i)
    for _ in range(34):  # past 32 epochs: an epoch history chunk
        seg = s.refresh().segments
        s.scale(split=seg[0].id) if len(seg) == 1 else s.scale(merge=[g.id for g in seg])
    s.appending.group.contended, s.appending.group.crowd = CONTENDED_COMMITS, CROWD  # publish first
    published = s.appending.group._contend

    def contend(own: Part, state: StreamState) -> list[tuple[int, str]]:
        names = published(own, state)
        seen.update(_files(root))  # the request, published before the fold that deletes it
        return names

    s.appending.group._contend = contend  # type: ignore[method-assign]
    s.append(_batch(100), key="k", writer_id="g", batch_id=0)
    group = Group.create(s, "readers", start=0)
    group.ack(group.read("c1", count=5))
    s.compact(full=True)
    seen.update(_files(root))
    s.truncate(s.cut_at(s.read().column("_timestamp")[50].as_py()))
    s.vacuum(grace_ms=0)
    s.vacuum(grace_ms=0)
    return seen | _files(root)


@pytest.fixture(scope="module")
def exercised(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _exercised(tmp_path_factory.mktemp("protocol") / "s")


@pytest.fixture(scope="module")
def walked(exercised: dict[str, bytes]) -> tuple[list[str], dict[str, re.Pattern[str]]]:
    return sorted(exercised), _kinds()


def test_every_metadata_object_of_a_new_stream_is_sealed(exercised: dict[str, bytes]) -> None:
    """A new stream declares ``checksums`` (§16): every object under ``_tstream/`` ends with the
    digest of its content, and it verifies."""
    meta = {rel: data for rel, data in exercised.items() if rel.startswith("_tstream/")}
    assert len(meta) > 100
    unsealed = sorted(rel for rel, data in meta.items() if not seal.is_sealed(data))
    assert not unsealed, f"objects without a checksum: {unsealed[:10]}"
    for data in meta.values():
        seal.unseal(data, required=True)  # raises on a mismatch


def test_the_spec_names_every_object_a_stream_holds(walked: tuple[list[str], dict[str, re.Pattern[str]]]) -> None:
    files, kinds = walked
    unnamed = [f for f in files if not any(p.match(f) for p in kinds.values())]
    assert not unnamed, f"objects docs/protocol.md §15 does not name: {unnamed}"


@pytest.mark.parametrize("kind", ["journal entry", "head", "anchor", "checkpoint", "index node",
                                  "sealed-map shard version", "epoch record", "epoch history chunk",
                                  "consumer-group version", "macro-map bucket version", "compaction manifest",
                                  "group-commit request", "first-write marker", "data chunk", "macro-chunk"])
def test_the_exercise_reaches_each_kind(walked: tuple[list[str], dict[str, re.Pattern[str]]], kind: str) -> None:
    files, kinds = walked
    assert any(kinds[kind].match(f) for f in files), f"no {kind} object in {files[:20]}..."
