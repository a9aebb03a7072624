"""What the pipeline jobs share: the command-line options of the cluster and the SparkSession."""

from __future__ import annotations

import argparse
import os
import sys
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
