"""Hypothesis state machine over a partition log (Redpanda's storage op-fuzzer is the model).

Operations: append (through either of two Log objects sharing one
PartitionState, as two workers do), roll, truncate, retention, clean reopen,
crash + recovery, a third Log object's first use of the slot.  After every
step: offsets are contiguous, reads return exactly the bytes appended,
log_end_offset = last offset + 1, and the slot's segment count is the number
of segments on disk.
"""

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.storage.config import LogConfig
from kafkapy.storage.shared import LocalPartitionState

from support.storage import T0, Clock, make_batch, open_log, read_bytes, records_of, whole_batches

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=90, segment_index_bytes=8 * 6,
                   retention_ms=50_000, file_delete_delay_ms=0)


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="logsm-") + "/t-0"
        self.clock = Clock()
        self.batches = []            # (base_offset, last_offset, bytes as stored)
        self.log_start = 0
        self.next_ts = T0
        self._open(clean=None)

    def _open(self, clean):
        state = LocalPartitionState()
        kw = {}
        if clean is not None:
            kw = {"had_clean_shutdown": clean, "recovery_point": 0, "log_start_offset": self.log_start,
                  "high_watermark": self.expected_leo}
        self.a = open_log(self.dir, CONFIG, state=state, clock=self.clock, **kw)
        self.b = open_log(self.dir, CONFIG, state=state, clock=self.clock)

    @property
    def expected_leo(self):
        return self.batches[-1][1] + 1 if self.batches else self.log_start

    def teardown(self):
        for log in (self.a, self.b):
            log.release()
        shutil.rmtree(self.dir.rsplit("/", 1)[0], ignore_errors=True)

    @rule(which=st.booleans(), count=st.integers(1, 5), value_size=st.integers(0, 150),
          ts_step=st.integers(0, 20_000))
    def append(self, which, count, value_size, ts_step):
        log = self.a if which else self.b
        self.next_ts += ts_step
        records = records_of(make_batch(count, timestamp=self.next_ts, value_size=value_size))
        with log.lock():
            result = log.append_as_leader(records, 1)
            log.update_high_watermark(log.log_end_offset)
        assert result.first_offset == self.expected_leo
        self.batches.append((result.first_offset, result.last_offset, bytes(records)))

    @rule(which=st.booleans())
    def roll(self, which):
        log = self.a if which else self.b
        with log.lock():
            log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data):
        i = data.draw(st.integers(0, len(self.batches) - 1))
        target = self.batches[i][0] + data.draw(st.integers(0, self.batches[i][1] - self.batches[i][0]))
        with self.b.lock():
            self.b.truncate_to(target)
        # The batch containing the target goes whole.
        del self.batches[i:]

    @rule(advance_ms=st.integers(0, 100_000))
    def retention(self, advance_ms):
        self.clock.advance(advance_ms)
        with self.a.lock():
            self.a.delete_retention_segments(self.next_ts + advance_ms)
            self.log_start = self.a.log_start_offset
            assert self.log_start == self.a.segments()[0].base_offset
        self.batches = [b for b in self.batches if b[0] >= self.log_start]

    @rule()
    def reopen_clean(self):
        self.a.close()
        self.b.close()
        self._open(clean=True)

    @rule()
    def crash_and_recover(self):
        self.a.release()
        self.b.release()
        self._open(clean=False)

    @rule()
    def first_use_elsewhere(self):
        """A third Log object attaching to the slot (a worker's first use of
        the partition) sees what a full load would: the same segments."""
        fresh = open_log(self.dir, CONFIG, state=self.a.state, clock=self.clock)
        try:
            with fresh.lock():
                seen = [(s.base_offset, s.size, s.offset_index.entries) for s in fresh.segments()]
            with self.a.lock():
                assert seen == [(s.base_offset, s.size, s.offset_index.entries) for s in self.a.segments()]
            if self.batches:
                data = read_bytes(fresh, self.batches[-1][0], 1000)
                assert whole_batches(data)[0].base_offset == self.batches[-1][0]
        finally:
            fresh.release()

    @invariant()
    def slot_counts_the_segments_on_disk(self):
        on_disk = [n for n in os.listdir(self.dir) if n.endswith(".log")]
        with self.a.lock():
            assert self.a.state.segment_count == len(on_disk) == len(self.a.segments())

    @invariant()
    def log_matches_model(self):
        for log in (self.a, self.b):
            with log.lock():
                assert log.log_end_offset == self.expected_leo
                assert log.log_start_offset == self.log_start
                assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        previous = None
        for base, last, _ in self.batches:
            assert previous is None or base == previous + 1
            previous = last
        # Read everything back through alternating Log objects.
        out = []
        offset = self.log_start
        readers = (self.a, self.b)
        n = 0
        while offset < self.expected_leo:
            data = read_bytes(readers[n % 2], offset, 1000)
            headers = whole_batches(data)
            assert headers
            for h in headers:
                out.append(data[h.position: h.position + h.batch_length + 12])
                offset = h.base_offset + h.last_offset_delta + 1
            n += 1
        assert out == [b[2] for b in self.batches]


LogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
test_log_state_machine = LogMachine.TestCase
