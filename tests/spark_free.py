"""The Spark-free install at work: create a stream, append, read, ``to_reader``, ``tstream info``
and the metadata tables, with no PySpark; ``format("tstream")``'s adapters then name the extra.

Run by CI in a fresh venv that installed the project without the ``spark`` extra
(``python tests/spark_free.py``), and by ``tests/test_imports.py`` here with ``--block``, which
hides the installed PySpark from this process. Prints one line per step; exits non-zero on any
failure.
"""

from __future__ import annotations

import io
import sys
import tempfile
from contextlib import redirect_stdout


def main(argv: list[str]) -> int:
    if "--block" in argv:
        sys.modules["pyspark"] = None  # type: ignore[assignment]  # Python's "not importable" mark
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit("pyspark is importable: this check needs an environment without it")
    import pyarrow as pa
    import pyspark_tstream
    from pyspark_tstream import Stream
    from pyspark_tstream.cli import app

    url = f"file://{tempfile.mkdtemp()}/s"
    s = Stream.create(url, segments=2)
    s.append(pa.table({"device": ["a", "b", "c"], "v": [1, 2, 3]}), key="device", writer_id="svc", batch_id=0)
    assert s.read().num_rows == 3, "read"
    assert sum(b.num_rows for b in s.to_reader()) == 3, "to_reader"
    assert [r["operation"] for r in s.metadata("history").to_pylist()] == ["create", "append"], "history"
    out = io.StringIO()
    with redirect_stdout(out):
        code = app.main(["info", url])
    assert code == 0 and url.removeprefix("file://") in out.getvalue(), out.getvalue()
    print(f"ok: pyspark_tstream {pyspark_tstream.__version__} created, appended, read and described {url} "
          "without PySpark")
    try:
        import pyspark_tstream.datasource
    except ModuleNotFoundError as e:
        assert "pip install 'pyspark-tstream[spark]'" in str(e), str(e)
        print(f"ok: the Spark adapters say what to install: {e}")
    else:
        raise SystemExit("the Spark data source imported without PySpark")
    loaded = [m for m, mod in sys.modules.items() if mod is not None and (m == "pyspark" or m.startswith("pyspark."))]
    assert not loaded, f"pyspark was imported: {loaded}"
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
