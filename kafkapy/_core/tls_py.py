"""Decrypting many TLS records per call, in plain Python (twin of ``tls``).

``Reader(obj, incoming)`` wraps one connection's server-side
``ssl.SSLObject`` and its incoming ``ssl.MemoryBIO``.  ``read_into`` fills a
buffer with the plaintext of as many whole records as the BIO holds, up to a
byte count.  Here every record costs a call of ``SSLObject.read`` (OpenSSL
hands out at most one record per ``SSL_read``); the compiled module loops in C
(see tls.pyx).  Owned by the connection's processor; holds no other state
than a failure seen after some plaintext was already handed out.
"""

import ssl


class Reader:
    __slots__ = ("obj", "error")

    def __init__(self, obj, incoming):
        self.obj = obj
        self.error = None  # an ssl.SSLError to raise on the next call

    def read_into(self, buffer, offset, want):
        """Decrypt into ``buffer[offset:offset + want]``: the byte count (> 0);
        -1 when no whole record is waiting; 0 when the peer closed TLS
        (close_notify).  A record that fails raises ``ssl.SSLError``, after
        the plaintext decrypted before it was returned."""
        if self.error is not None:
            raise self.error
        got = 0
        read = self.obj.read
        with memoryview(buffer) as view:
            if offset < 0 or want < 0 or offset + want > view.nbytes:
                raise ValueError(f"[{offset}:{offset + want}] outside a buffer of {view.nbytes} bytes")
            while got < want:
                try:
                    n = read(want - got, view[offset + got:offset + want])
                except ssl.SSLWantReadError:
                    return got or -1
                except ssl.SSLError as exc:
                    if not got:
                        raise
                    self.error = exc
                    return got
                if n == 0:
                    return got  # close_notify: 0 now or on the next call
                got += n
        return got
