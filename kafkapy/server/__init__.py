"""The broker server: configuration, supervisor, reactor (acceptor, processors, workers), API handlers, broker wiring."""
