"""A child's stop order (server/child_signals.py) that arrives before the
child installed its orderly stop is kept and carried out by ``on_stop``: the
child exits 0 through its own handler, never by the signal's default action
(which the supervisor counts as an unclean stop)."""

import multiprocessing
import os
import signal

from kafkapy.server import child_signals


def _child(ready_w, go_r):
    child_signals.install_in_child(os.getppid())
    os.write(ready_w, b"r")
    os.read(go_r, 1)  # the stop order comes while the child waits here, before on_stop
    stopped = []
    child_signals.on_stop(lambda: stopped.append(True))
    os._exit(0 if stopped == [True] else 3)


def test_a_stop_order_before_on_stop_is_carried_out_by_it():
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    child = multiprocessing.get_context("fork").Process(target=_child, args=(ready_w, go_r))
    child.start()
    try:
        assert os.read(ready_r, 1) == b"r"
        child_signals.stop_child(child.pid)
        os.write(go_w, b"g")
        child.join(10)
        assert child.exitcode == 0, child.exitcode
    finally:
        if child.is_alive():
            os.kill(child.pid, signal.SIGKILL)
            child.join(5)
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
