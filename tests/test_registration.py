"""Spark finds ``format("tstream")`` on its own, and the package ships every subpackage.

Spark registers Python data sources by running ``pyspark/sql/worker/lookup_data_sources.py`` in
a Python worker: it imports every top-level module named ``pyspark_*`` that
``pkgutil.iter_modules()`` lists and registers its ``DefaultSource`` under ``name()``. These
tests replay that lookup, so a broken install or import shows here with the fix in the message
instead of as ``[DATA_SOURCE_NOT_FOUND]`` in a user's query.
"""

from __future__ import annotations

import configparser
import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT

FIX = ("reinstall with: pip install -e . --config-settings editable_mode=strict "
       "(or a plain pip install .); a default editable install of this remapped layout hides the "
       "package from Spark's discovery")


def _run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter outside the repo, as a Spark worker would."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=Path.home(),
                          capture_output=True, text=True, timeout=timeout)


def test_spark_discovery_sees_the_package() -> None:
    names = {m.name for m in pkgutil.iter_modules()}
    assert "pyspark_tstream" in names, f"pkgutil.iter_modules() does not list pyspark_tstream; {FIX}"


def test_default_source_is_the_tstream_data_source() -> None:
    from pyspark.sql.datasource import DataSource

    module = importlib.import_module("pyspark_tstream")
    source = getattr(module, "DefaultSource", None)
    if source is None:
        try:  # the package __init__ hides import errors so Spark's discovery survives them
            importlib.import_module("pyspark_tstream.datasource.source")
        except ModuleNotFoundError as e:
            hint = (" datasource/source.py exists, so the install predates it: a strict editable "
                    f"install links files one by one; {FIX}"
                    if (ROOT / "datasource" / "source.py").exists() else "")
            pytest.fail(f"pyspark_tstream.DefaultSource is missing: {e}.{hint}")
        except Exception as e:  # noqa: BLE001 - any import failure is reported
            pytest.fail(f"pyspark_tstream.DefaultSource is missing because importing "
                        f"pyspark_tstream.datasource.source fails: {e!r}")
        pytest.fail("pyspark_tstream has no DefaultSource; python/__init__.py must expose the "
                    "data source class as DefaultSource")
    assert isinstance(source, type) and issubclass(source, DataSource), (
        f"pyspark_tstream.DefaultSource is {source!r}, not a pyspark.sql.datasource.DataSource")
    assert source.name() == "tstream"


def test_lookup_as_spark_runs_it_finds_tstream() -> None:
    # The loop of lookup_data_sources._main, in a clean process: one pyspark_* module that
    # raises on import makes Spark skip every Python data source, ours included.
    proc = _run_python("""
        import json, pkgutil
        from importlib import import_module
        from pyspark.sql.datasource import DataSource
        found, listed = {}, False
        for info in pkgutil.iter_modules():
            if info.name.startswith("pyspark_"):
                listed = listed or info.name == "pyspark_tstream"
                mod = import_module(info.name)
                if hasattr(mod, "DefaultSource") and issubclass(mod.DefaultSource, DataSource):
                    found[mod.DefaultSource.name()] = info.name
        print(json.dumps({"found": found, "listed": listed}))
    """)
    assert proc.returncode == 0, f"Spark's data source lookup would fail:\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["listed"], f"pkgutil.iter_modules() does not list pyspark_tstream; {FIX}"
    assert result["found"].get("tstream") == "pyspark_tstream", (
        f"lookup found {result['found']}: pyspark_tstream has no DefaultSource named 'tstream' "
        "(see test_default_source_is_the_tstream_data_source)")


def test_import_is_light() -> None:
    # Spark imports the package in a worker on the first lookup of any Python data source, and
    # pyspark's own DataSource module needs none of these: they belong inside the methods that
    # run (Spark's Python data source tutorial).
    heavy = ["pyarrow", "pandas", "fsspec", "s3fs"]
    proc = _run_python(f"""
        import sys
        import pyspark_tstream
        print(",".join(m for m in {heavy!r} if m in sys.modules))
    """)
    assert proc.returncode == 0, f"import pyspark_tstream raises:\n{proc.stderr[-3000:]}"
    eager = [m for m in proc.stdout.strip().split(",") if m]
    assert not eager, f"import pyspark_tstream imports {eager} eagerly; import them where used"


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.replace(",", "\n").splitlines() if line.strip()]


def test_every_package_directory_is_listed_in_setup_cfg() -> None:
    cfg = _setup_cfg()
    listed = set(_lines(cfg["options"]["packages"]))
    package_dir = dict(line.split("=", 1) for line in _lines(cfg["options"]["package_dir"]))
    roots = {name.strip(): ROOT / folder.strip() for name, folder in package_dir.items()}
    on_disk = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            # python/ is the package root; a mapped sibling (datasource/) is not inside it
            on_disk.add(".".join((name, *rel)))
    missing = sorted(on_disk - listed)
    assert not missing, f"setup.cfg [options] packages lacks {missing}; a wheel would ship without them"
    absent = sorted(listed - on_disk)
    assert not absent, f"setup.cfg [options] packages lists {absent}, which have no __init__.py"


def test_tests_folder_is_not_a_package() -> None:
    # With tests/__init__.py pytest would put the repo root on sys.path, and `import conf...`
    # would load a second copy of the modules beside pyspark_tstream.conf.
    assert not (ROOT / "tests" / "__init__.py").exists()


@pytest.mark.slow
@pytest.mark.spark
def test_spark_registers_tstream_without_explicit_register() -> None:
    proc = _run_python("""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").getOrCreate())
        try:
            manager = spark._jsparkSession.sessionState().dataSourceManager()
            print("FOUND" if manager.dataSourceExists("tstream") else "MISSING")
        finally:
            spark.stop()
    """, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "FOUND", (
        "a new Spark session does not know format('tstream') (the other tests here tell why)\n"
        + proc.stderr[-2000:])
