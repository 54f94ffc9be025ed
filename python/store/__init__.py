"""The store: the one boundary to a filesystem or object store, its failure rules, and every path on it.

Nothing here knows what a journal entry or a chunk means; every other package reaches the store
through :class:`~pyspark_tstream.store.storage.Store` and names its objects through
:mod:`~pyspark_tstream.store.layout`.
"""
