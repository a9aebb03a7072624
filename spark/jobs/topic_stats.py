"""Batch statistics of RocketMQ topics per topic, tag and hour: messages, body bytes and the
born-to-store latency (ms: avg, p50, p99, max), written as a Parquet table and printed.

    python spark/jobs/topic_stats.py -n 127.0.0.1:9876 --topic A,B [--output /data/stats] \
        [--starting-timestamp MS] [--ending-timestamp MS]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_common, batch_reader, run_batch  # noqa: E402


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="topic_stats", description=__doc__.split("\n\n")[0])
    add_common(p)
    p.add_argument("--topic", required=True, help="topics (comma list)")
    p.add_argument("--output", default=None, help="write the table here as Parquet (overwritten)")
    p.add_argument("--starting-timestamp", type=int, default=None, help="from this store time (epoch ms)")
    p.add_argument("--ending-timestamp", type=int, default=None, help="before this store time (epoch ms)")
    p.add_argument("--rows", type=int, default=100, help="rows to print (default 100)")
    return p.parse_args(argv)


def stats(df):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    latency = (F.col("storeTimestamp").cast("double") - F.col("bornTimestamp").cast("double")) * 1000
    return (df.withColumn("hour", F.date_trunc("hour", "storeTimestamp"))
            .withColumn("tags", F.coalesce("tags", F.lit("")))
            .groupBy("topic", "tags", "hour")
            .agg(F.count(F.lit(1)).alias("messages"),
                 F.sum(F.length("body")).alias("bytes"),
                 F.avg(latency).alias("latency_avg_ms"),
                 F.percentile_approx(latency, 0.5).alias("latency_p50_ms"),
                 F.percentile_approx(latency, 0.99).alias("latency_p99_ms"),
                 F.max(latency).alias("latency_max_ms"))
            .orderBy("topic", "tags", "hour"))


def run(spark, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The statistics table (also written to --output and printed)."""
    table = stats(batch_reader(spark, args, args.topic).load()).cache()
    if args.output:
        table.write.mode("overwrite").parquet(args.output)
    table.show(args.rows, truncate=False)
    return table


def main(argv: list[str] | None = None) -> int:
    return run_batch(parse(argv), "rmqwire topic_stats", run)


if __name__ == "__main__":
    sys.exit(main())
