"""PySpark is an extra (``pip install 'pyspark-tstream[spark]'``): the Spark adapters check for it
when they are imported, so a process without it is told what to install, not ``No module named
'pyspark'`` from deep inside an import."""

from __future__ import annotations

import importlib.util

#: The oldest PySpark the adapters run on (its Python Data Source API).
PYSPARK_MIN = (4, 0)
#: What to run where PySpark is missing or too old.
INSTALL = "pip install 'pyspark-tstream[spark]'"


def require_pyspark(what: str = "format('tstream')") -> None:
    """Raise ModuleNotFoundError naming :data:`INSTALL` unless PySpark >= 4.0 is importable."""
    if importlib.util.find_spec("pyspark") is None:
        raise ModuleNotFoundError(f"{what} needs PySpark >= {PYSPARK_MIN[0]}.{PYSPARK_MIN[1]}, which is not "
                                  f"installed: {INSTALL} (the Python API, the tstream CLI and to_reader "
                                  "run without it)", name="pyspark")
    # pyspark itself, not importlib.metadata: every Spark Python worker imports this package (data
    # source discovery) and has pyspark loaded already, while a metadata lookup scans sys.path
    import pyspark

    version = str(getattr(pyspark, "__version__", ""))
    major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if major_minor and major_minor < PYSPARK_MIN:
        raise ModuleNotFoundError(f"{what} needs PySpark >= {PYSPARK_MIN[0]}.{PYSPARK_MIN[1]}; this environment "
                                  f"has {version}: {INSTALL}", name="pyspark")
