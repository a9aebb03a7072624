"""``rmqadmin``: mqadmin's commands on the Admin API (``rmqwire.cli.main``), one module per group
of commands with the text formatting next to each command (``javafmt`` holds the JVM's formatting
rules mqadmin's output depends on)."""
