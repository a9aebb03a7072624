"""The official Apache RocketMQ (Maven Central jars) as a test peer for rmqwire."""
