"""rmqwire's Grafana dashboards and Prometheus rules, built from code (``python -m grafana.build``)."""
