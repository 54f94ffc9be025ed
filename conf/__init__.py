"""Option keys, defaults and typed parsers of ``format("tstream")``.

``keys`` holds the option names and their ``_DEFAULT`` twins, ``parsing`` the typed parsers, and
``options`` the frozen ``SourceOptions``/``SinkOptions`` the Spark adapters build once on the
driver. Kept empty of imports so that ``import pyspark_tstream`` stays light.
"""
