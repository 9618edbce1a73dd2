"""The harness's one wait: poll a predicate until it holds or a deadline passes,
then fail saying what was awaited (and the predicate's last answer).

A predicate that raises is polled again (a broker mid-restart refuses
connections for a moment); if it still raises at the deadline, the exception
is the last answer the failure shows.
"""

from __future__ import annotations

import time


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition", interval_s: float = 0.2):
    """Poll ``predicate`` until it returns something truthy (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:  # bounded by the deadline
        try:
            last = predicate()
        except Exception as exc:  # a broker mid-restart: try again
            last = exc
        else:
            if last:
                return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")
