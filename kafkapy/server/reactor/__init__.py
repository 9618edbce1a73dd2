"""The reactor: acceptor, processors, the request channel and handler workers."""
