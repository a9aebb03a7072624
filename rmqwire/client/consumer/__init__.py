"""Consumers: the push consumer, the lite pull consumer and the plain queue puller, with their
rebalance, offsets and consume services (Java ``org.apache.rocketmq.client.consumer`` and
``impl.consumer``). The blocking classes users call are in ``blocking``; the Twisted cores are
``push_consumer.PushConsumer`` and ``lite_pull_consumer.LitePullConsumer``."""
