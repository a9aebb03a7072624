"""Metrics: the exporter of rocketmq-exporter's families (``exporter``) and native metrics."""
