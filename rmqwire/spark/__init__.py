"""Spark reads and writes RocketMQ through rmqwire: a PySpark (>= 4.0) Python data source.

    from rmqwire.spark import RocketMQDataSource
    spark.dataSource.register(RocketMQDataSource)          # short name "rocketmq"

Needs the ``spark`` extra (``pip install 'rmqwire[spark]'``: pyspark and pyarrow).
"""

from rmqwire.spark.source import RocketMQDataSource

__all__ = ["RocketMQDataSource"]
