"""Group commit: a published request that another commit of its (writer, batch) settled keeps
its files while a fold may still take it, whichever way its writer's commit ends."""

from __future__ import annotations

from group_requests import counts as _counts
from group_requests import exists as _exists
from group_requests import publish as _publish
from group_requests import rows as _rows
from pyspark_tstream.api.stream import Stream
from pyspark_tstream.store import layout
from pyspark_tstream.write.commit import CommitIntent
from pyspark_tstream.write.group import CONTENDED_COMMITS, Part


def test_an_entry_that_folds_others_but_not_its_own_settled_request_keeps_its_files(url: str) -> None:
    """A twin committed (w, 0) while w's published request waited; w's next attempt builds an
    entry of another writer's request alone. That entry deletes the request it folded, and w's
    files stay: its request is still foldable within its window, kept out only by the dedupe."""
    s = Stream.create(url, segments=2)
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    w = Stream.open(url)
    mine = _publish(w, "w", 0)
    other = _publish(Stream.open(url), "p", 0)
    assert not Stream.open(url).append(_rows("w", 0), writer_id="w", batch_id=0).duplicate  # the twin
    w.appending.group.contended = 1  # it lost a race: it lists before its attempt
    own = Part(mine.rid, mine.request(None), mine.base)
    done = w.appending.group.commit(own.req, w.refresh(), own=own)
    assert done.entry is None and done.created  # an entry of others' requests only
    entry = w.journal.read_entry(w.refresh().pos)
    assert [f.rid for f in entry.folds] == [other.rid]
    assert done.keep == {c.path for c in mine.chunks}
    # the folder deletes what it folded; w's own request waits for a fold window to pass (vacuum)
    assert sorted(layout.request_name(n)[1] for n in s.store.list(layout.REQUESTS)) == [mine.rid]
    assert _counts(Stream.open(url)) == {("a", 0): 10, ("w", 0): 10, ("p", 0): 10}


def test_a_settled_published_request_keeps_its_files_through_the_append_path(url: str) -> None:
    """The Appender deletes a no-op's fresh files but those Committed.keep names."""
    s = Stream.create(url, segments=2)
    s.append(_rows("a", 0), writer_id="a", batch_id=0)
    w = Stream.open(url)
    mine = _publish(w, "w", 0)
    _publish(Stream.open(url), "p", 0)
    Stream.open(url).append(_rows("w", 0), writer_id="w", batch_id=0)  # the twin
    group = w.appending.group
    group.contended = 1
    own = Part(mine.rid, mine.request(None), mine.base)
    real = group.commit
    group.commit = lambda req, state, listed=None, own=own: real(req, state, listed, own)  # type: ignore[method-assign]
    ack = w.appending.commit(list(mine.chunks), CommitIntent(writer_id="w", batch_id=0, schema=_rows("w", 0).schema),
                             fresh=True)
    assert ack.duplicate
    assert all(_exists(w, c.path) for c in mine.chunks)


def test_a_fold_after_writer_expiry_names_files_that_exist_when_a_settled_request_lost_to_a_fold(
        url: str) -> None:
    """End to end through ``append``: writer w lost a race and published its request; leading the
    next fold, it lost again to a twin that committed (w, 1); its next entry folded only another
    writer's request. w's append is a no-op; once w expired, a contended writer folded w's still
    published request, appending the batch again (a replay after expiry), and its files were
    there: before, the no-op had deleted them and every read of the stream failed."""
    import time

    Stream.create(url, segments=1, writer_retention_ms=50)
    w = Stream.open(url)
    creates: list[str] = []

    def race(op: str, rel: str) -> None:
        if op != "put_if_absent" or not rel.startswith(layout.JOURNAL) or len(creates) == 2:
            return
        creates.append(rel)
        if len(creates) == 1:  # another writer lands first: w publishes and lists
            y = Stream.open(url)
            y.append(_rows("y", 0), writer_id="y", batch_id=0)
            _publish(y, "p", 0, rid="f" * 16)  # newer than w's (same base, larger id): w leads
        else:  # a twin of w (a zombie task, a restarted driver) lands the batch
            Stream.open(url).append(_rows("w", 1), writer_id="w", batch_id=1)

    w.store.observer = race
    assert w.append(_rows("w", 1), writer_id="w", batch_id=1).duplicate
    w.store.observer = None
    s = Stream.open(url)
    assert len(creates) == 2 and s.state.was_folded("f" * 16) == s.state.pos  # w's entry folded p's alone
    time.sleep(0.1)  # w falls silent past its retention
    x = Stream.open(url)
    x.append(_rows("x", 0), writer_id="x", batch_id=0)
    assert "w" not in x.state.writers
    x.appending.group.contended = CONTENDED_COMMITS  # it lists the published requests, and folds w's
    x.append(_rows("x", 1), writer_id="x", batch_id=1)
    after = Stream.open(url)
    assert _counts(after) == {("y", 0): 10, ("p", 0): 10, ("w", 1): 20, ("x", 0): 10, ("x", 1): 10}
    report = after.verify()
    assert report.ok, report.summary()
