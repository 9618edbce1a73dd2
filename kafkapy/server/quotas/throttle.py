"""How a throttled response travels from a worker to its processor.

A worker whose request pushed a client over a quota sends its processor
``(conn_id, THROTTLED, (kind, payload, throttle_ms, client_throttles))``
instead of ``(conn_id, kind, payload)`` (``kind`` one of the channel's SEND,
NOREPLY, DELAY). The processor handles ``kind`` as usual and:

* ``client_throttles`` (the request version is one whose clients back off by
  themselves, Kafka's ``AbstractResponse.shouldClientThrottle``; KIP-219):
  sends the response at once and keeps the connection muted, after the
  response is out, until ``throttle_ms`` after it got the message;
* otherwise (older versions): holds the response for ``throttle_ms``, then
  sends it (Kafka delays the response of clients that do not throttle).

Kafka starts the throttle when the response is handed to the network layer;
so does this (the processor's receipt of the message).
"""

from __future__ import annotations

THROTTLED = 4  # beside the channel's SEND 0, NOREPLY 1, CLOSE 2, DELAY 3

# AbstractResponse.shouldClientThrottle: api key -> first version whose clients
# throttle themselves (0: all versions); absent: none (the response is delayed).
CLIENT_THROTTLES_FROM = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2,
    19: 3, 20: 2, 21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1,
    34: 1, 35: 1, 37: 1, 38: 1, 40: 1, 41: 1, 42: 1, 43: 0, 44: 0, 45: 0, 46: 0, 47: 0, 50: 0,
    51: 0, 75: 0,
}


def client_throttles(api_key: int, version: int) -> bool:
    first = CLIENT_THROTTLES_FROM.get(api_key)
    return first is not None and version >= first
