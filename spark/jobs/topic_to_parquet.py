"""Stream RocketMQ topics into a Parquet table partitioned by topic and date (of the store time).

Exactly-once through the checkpoint: offsets are kept in Spark's checkpoint and the file sink's
log (``<output>/_spark_metadata``) lists only committed files, so a run killed at any point and
started again with the same --checkpoint writes every message once (read the table with Spark).

    python spark/jobs/topic_to_parquet.py -n 127.0.0.1:9876 --topic A,B --output /data/t \
        --checkpoint /data/t.ckpt [--available-now] [--max-offsets-per-trigger 100000]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_common, connection_options, session  # noqa: E402

#: Spark waits only 10 s for the driver-side Python process of a streaming source to connect
#: back; on a loaded machine that can fail before any batch ran, so the query is started again.
WORKER_START_FAILED = "Python worker failed to connect back"
START_ATTEMPTS = 5


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="topic_to_parquet", description=__doc__.split("\n\n")[0])
    add_common(p)
    p.add_argument("--topic", required=True, help="topics to read (comma list)")
    p.add_argument("--output", required=True, help="Parquet table directory")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (resume from it)")
    p.add_argument("--starting-offsets", default="earliest",
                   help="where a new query starts: earliest, latest or JSON (default earliest)")
    p.add_argument("--sub-expression", default="*", help="tag filter, e.g. 'TagA || TagB'")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, help="messages per micro-batch at most")
    p.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval (default 5)")
    p.add_argument("--available-now", action="store_true", help="read what is there now, then stop")
    p.add_argument("--commit-to-group", default=None,
                   help="publish each completed batch's offsets to this consumer group (monitoring)")
    p.add_argument("--timeout-seconds", type=float, default=None, help="stop after this long (default: run on)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    spark = session(args, "rmqwire topic_to_parquet")
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("rocketmq").options(**connection_options(args))
              .option("topic", args.topic).option("startingOffsets", args.starting_offsets)
              .option("subExpression", args.sub_expression))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    if args.commit_to_group:
        reader = reader.option("commitOffsetsToGroup", args.commit_to_group)
    df = reader.load().withColumn("date", F.to_date("storeTimestamp"))
    writer = (df.writeStream.format("parquet").option("path", args.output)
              .option("checkpointLocation", args.checkpoint).partitionBy("topic", "date"))
    writer = (writer.trigger(availableNow=True) if args.available_now
              else writer.trigger(processingTime=f"{args.trigger_seconds} seconds"))
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            query = writer.start()
            print(f"started query {query.id} -> {args.output}", flush=True)
            try:
                query.awaitTermination(args.timeout_seconds)
                break
            except Exception as e:
                if WORKER_START_FAILED not in str(e) or attempt == START_ATTEMPTS:
                    raise
                print(f"{WORKER_START_FAILED}; starting the query again from its checkpoint", flush=True)
            finally:
                if query.isActive:
                    query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
