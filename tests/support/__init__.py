"""Test harness: real broker processes (``broker``) and a raw protocol client (``rawclient``)."""
