"""Put this directory on the PYTHONPATH of Spark's Python workers (tests and benchmarks do) to
make them import the installed, byte-compiled pyspark instead of ``pyspark.zip``, which Spark
puts first on their path and which Python compiles again at every start (twice the CPU).

Why it matters: Spark waits only 10 s (hard-coded) for the driver-side Python process of a
streaming source to connect back; on a machine loaded far beyond its cores the zip import alone
can take longer, and the query fails with "Python worker failed to connect back".
"""

import sys

_zips = [p for p in sys.path if p.endswith(".zip") and ("pyspark" in p or "py4j" in p)]
if _zips:
    try:
        from importlib.machinery import PathFinder

        _rest = [p for p in sys.path if p not in _zips]
        if PathFinder.find_spec("pyspark", _rest) is not None:  # an installed pyspark: prefer it
            sys.path[:] = _rest + _zips
    except Exception:  # never stop a worker from starting
        pass
