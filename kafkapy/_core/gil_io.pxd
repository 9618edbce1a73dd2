# The C entry point other compiled modules call (producer.FastSend.send);
# the Python API is in gil_io.pyx.

cdef void yield_to_io_threads() noexcept
