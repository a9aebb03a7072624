"""Wall time of rmqadmin vs the official mqadmin (``python -m tools.bench.cli``)."""
