"""How the broker's processes take signals: one shutdown, whoever is signalled.

A broker is a process group, the supervisor and the children it forks. An
operator's SIGTERM reaches the supervisor alone (``kill PID``, systemd's
``KillMode=mixed``) or every process of the group at once (``kill -- -PGID``,
``KillMode=control-group``, a container runtime, the chaos tool's bounces);
Ctrl-C's SIGINT always reaches the whole group. Every one of these means the
same thing as in Kafka's single JVM: the supervisor's ordered shutdown, which
asks the controller to move this broker's leaderships away *while every
child still serves* (the processors answer LeaderAndIsr, the controller child
keeps the ZooKeeper session and, on the controller's broker, the controller
role), and only then stops the children, the ZooKeeper session last.

So a child never acts on SIGTERM or SIGINT itself: SIGTERM is passed on to
the supervisor (a no-op when it got one too), SIGINT is ignored, and the
supervisor stops a child with ``STOP_SIGNAL``, which nothing else sends.
Until 2026-11 the children stopped on SIGTERM: a group SIGTERM to the
controller's broker made it resign and its processors close before its
controlled shutdown, which then timed out three times (about 90 s,
``request.timeout.ms`` each) and ended in an unclean stop.
"""

from __future__ import annotations

import faulthandler
import os
import signal

# SIGUSR1: unused by the standard library and by every library the broker
# loads, and never sent to a process group by a terminal or a service manager.
STOP_SIGNAL = signal.SIGUSR1
# Every child stops in well under a second when nothing is wrong; the
# supervisor's bound (kafkapy.shutdown.timeout.ms) is 30 s by default.
STUCK_DUMP_AFTER_S = 15.0


def install_in_child(supervisor_pid: int) -> None:
    """A forked child's dispositions, set before its target runs: SIGTERM goes
    on to the supervisor, SIGINT is ignored, STOP_SIGNAL is remembered until
    the target installs its own orderly stop with ``on_stop``, which then
    runs it at once. Every child the supervisor sends STOP_SIGNAL to calls
    ``on_stop`` first thing in its target."""

    def forward(_signum, _frame):
        try:
            os.kill(supervisor_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # the supervisor is gone: PR_SET_PDEATHSIG ends this child

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A stop order that comes before the target's ``on_stop`` (a broker
    # stopped a few milliseconds after it started, while the log cleaner
    # still built its Broker view) is kept for ``on_stop`` to carry out at
    # once. Ending the process there instead (the default action) was an
    # exit by signal, which the supervisor counts as an unclean stop.
    signal.signal(STOP_SIGNAL, _remember_stop)


_stop_ordered = False


def _remember_stop(_signum, _frame) -> None:
    global _stop_ordered
    _stop_ordered = True


def on_stop(handler) -> None:
    """Run ``handler()`` when the supervisor stops this child; like any Python
    signal handler it runs on the main thread between bytecodes, so it should
    only set a flag or an event (from a thread of its own if the main thread
    may be waiting on that event's lock).

    A child still alive ``STUCK_DUMP_AFTER_S`` after its stop order writes
    every thread's stack to stderr (the broker's log) before the supervisor
    kills it at ``kafkapy.shutdown.timeout.ms``: a stop that hangs says where."""

    def stop(_signum, _frame):
        faulthandler.dump_traceback_later(STUCK_DUMP_AFTER_S, exit=False)
        handler()

    signal.signal(STOP_SIGNAL, stop)
    if _stop_ordered:
        stop(STOP_SIGNAL, None)


def wake_on_signal() -> int:
    """The read end of a pipe that takes a byte whenever this process gets a
    signal (``signal.set_wakeup_fd``), for a loop that waits in a selector to
    register: a stop order then ends the wait at once. Without it the stop
    waits out the loop's timeout, as a Python signal handler only sets a flag
    and an interrupted select resumes (PEP 475), on whichever thread the
    signal reached. The loop reads it empty with ``drain``; call from the
    main thread, after any fork (a forked child would share the pipe)."""
    read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    return read_fd


def drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def stop_child(pid: int) -> None:
    """The supervisor's stop order to one child."""
    try:
        os.kill(pid, STOP_SIGNAL)
    except ProcessLookupError:
        pass
