"""What only the Spark adapters need, shared by the source and the sink: feature flags of the
running PySpark, the driver's stream handle, Spark/Arrow translation, and worker memory and
outage memos."""
