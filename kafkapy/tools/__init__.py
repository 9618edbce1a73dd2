"""Command-line tools with the names, options and output of Kafka's own.

One module per tool, each exposing ``main(argv=None) -> int`` and registered
as a ``kafkapy-*`` console script.  ``_cli`` holds what they share: argument
parsing that fails with one line, ``k=v`` property parsing, and the wrapper
that turns any exception into one line on stderr and a non-zero exit.

The tools stand on the client library and protocol (and read on-disk formats
through storage and metadata, as Kafka's do), never on the broker's rooms:
server, coordinator, controller, replication (an import contract in
pyproject.toml; its one exception is kafkapy-install-service's default
server.properties, rendered from the broker's config table).
"""
