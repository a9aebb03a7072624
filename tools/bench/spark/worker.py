"""One Spark measurement (run in its own process so each gets a fresh JVM): ``count()`` of a
whole topic, then the same read written to Parquet; prints one JSON line.

    python -m tools.bench.spark.worker --namesrv A --topic T --master local[2] --output DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--output", required=True)
    a = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from rmqwire.spark import RocketMQDataSource

    spark = (SparkSession.builder.master(a.master).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)
    try:
        spark.range(1).count()  # JVM warm-up outside the measurements
        df = spark.read.format("rocketmq").option("nameServer", a.namesrv).option("topic", a.topic).load()
        t0 = time.perf_counter()
        n = df.count()
        t1 = time.perf_counter()
        df.write.mode("overwrite").parquet(a.output)
        t2 = time.perf_counter()
    finally:
        spark.stop()
    print(json.dumps({"rows": n, "countSeconds": t1 - t0, "parquetSeconds": t2 - t1}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
