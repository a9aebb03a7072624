"""Copy a time range of one topic into another through the rocketmq sink, keeping body, tags,
keys and properties (at-least-once: a retried task sends its rows again; de-duplicate by key).

    python spark/jobs/replay.py -n 127.0.0.1:9876 --from-topic A --to-topic A_replay \
        --starting-timestamp MS --ending-timestamp MS [--sub-expression 'TagA']
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_common, batch_reader, connection_options, run_batch  # noqa: E402


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="replay", description=__doc__.split("\n\n")[0])
    add_common(p)
    p.add_argument("--from-topic", required=True, help="topic to read")
    p.add_argument("--to-topic", required=True, help="topic to write")
    p.add_argument("--starting-timestamp", type=int, default=None, help="from this store time (epoch ms)")
    p.add_argument("--ending-timestamp", type=int, default=None, help="before this store time (epoch ms)")
    p.add_argument("--sub-expression", default="*", help="tag filter, e.g. 'TagA || TagB'")
    p.add_argument("--keep-order", action="store_true",
                   help="send each source queue's messages to one target queue (shardingKey)")
    return p.parse_args(argv)


def run(spark, args: argparse.Namespace) -> int:  # type: ignore[no-untyped-def]
    """Copy the range; returns how many messages were read (and sent)."""
    from pyspark.sql import functions as F

    reader = batch_reader(spark, args, args.from_topic).option("subExpression", args.sub_expression)
    cols = ["body", "tags", "keys", "properties"]
    if args.keep_order:
        cols.append(F.concat_ws("/", "brokerName", "queueId").alias("shardingKey"))
    # the read is planned once (offsets fixed), so the count and the write see the same rows
    df = reader.load().select(*cols).cache()
    n = df.count()
    (df.write.format("rocketmq").options(**connection_options(args))
     .option("topic", args.to_topic).mode("append").save())
    df.unpersist()
    print(f"replayed {n} messages from {args.from_topic} to {args.to_topic}", flush=True)
    return n


def main(argv: list[str] | None = None) -> int:
    return run_batch(parse(argv), "rmqwire replay", run)


if __name__ == "__main__":
    sys.exit(main())
