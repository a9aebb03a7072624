"""What the pipeline jobs share: the command-line options of the cluster and the SparkSession."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name-server", "-n", required=True, help="NameServer address host:port[;host:port]")
    p.add_argument("--master", default=None,
                   help="Spark master (local[2], spark://host:7077); default: spark-submit's or local[*]")
    p.add_argument("--access-key", default=None, help="ACL access key")
    p.add_argument("--secret-key", default=None, help="ACL secret key")
    p.add_argument("--conf", action="append", default=[], metavar="K=V", help="extra Spark conf (repeatable)")


def connection_options(args: argparse.Namespace) -> dict[str, str]:
    out = {"nameServer": args.name_server}
    if args.access_key:
        out.update(accessKey=args.access_key, secretKey=args.secret_key or "")
    return out


def session(args: argparse.Namespace, app: str) -> Any:
    """The SparkSession with the rocketmq source registered. Python workers run this
    interpreter unless PYSPARK_PYTHON says otherwise, so they import the same rmqwire."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from rmqwire.spark import RocketMQDataSource

    b = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "false")
    if args.master:
        b = b.master(args.master)
    for kv in args.conf:
        k, _, v = kv.partition("=")
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(RocketMQDataSource)
    return spark


def batch_reader(spark: Any, args: argparse.Namespace, topic: str) -> Any:
    """``spark.read`` of ``topic`` between --starting-timestamp and --ending-timestamp."""
    reader = spark.read.format("rocketmq").options(**connection_options(args)).option("topic", topic)
    if args.starting_timestamp is not None:
        reader = reader.option("startingTimestamp", str(args.starting_timestamp))
    if args.ending_timestamp is not None:
        reader = reader.option("endingTimestamp", str(args.ending_timestamp))
    return reader


def run_batch(args: argparse.Namespace, app: str, run: Callable[[Any, argparse.Namespace], Any]) -> int:
    """A batch job's main: ``run(spark, args)`` on a new session, stopped afterwards."""
    spark = session(args, app)
    try:
        run(spark, args)
    finally:
        spark.stop()
    return 0
