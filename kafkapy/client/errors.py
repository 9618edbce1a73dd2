"""Exceptions of kafkapy's client, one ``KafkaError`` subclass per Kafka error code.

``for_code(code, message)`` returns the instance for a code read from a
response: ``UNKNOWN_TOPIC_OR_PARTITION`` (3) becomes
``UnknownTopicOrPartitionError``, and so on for every ``ErrorCode``.  Each
instance carries ``error_code`` (an ``ErrorCode``), ``name`` and
``retriable``, like Kafka's ``ApiException`` hierarchy.  Errors that happen in
the client itself use the nearest Kafka code: a timeout is REQUEST_TIMED_OUT
(7), a broken connection NETWORK_EXCEPTION (13).
"""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.errors import KafkaError as _ProtocolKafkaError


class KafkaError(_ProtocolKafkaError):
    """Base of every client error; ``error_code`` is Kafka's numeric code."""

    default_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None, error_code: int | None = None) -> None:
        super().__init__(self.default_code if error_code is None else error_code, message)

    @property
    def name(self) -> str:
        code = self.error_code
        return code.name if isinstance(code, ErrorCode) else str(code)

    @property
    def errno(self) -> int:
        return int(self.error_code)

    @property
    def retriable(self) -> bool:
        code = self.error_code
        return isinstance(code, ErrorCode) and code.retriable

    def __reduce__(self):
        return (type(self), (self.message, int(self.error_code)))


def _class_name(code: ErrorCode) -> str:
    return "".join(part.capitalize() for part in code.name.split("_")) + "Error"


# One subclass per error code, built from the ErrorCode enum so the two can
# never drift apart.  type() builds an ordinary class; nothing is exec'd.
_BY_CODE: dict[int, type] = {}
for _code in ErrorCode:
    if _code == ErrorCode.NONE:
        continue
    _cls = type(_class_name(_code), (KafkaError,), {"default_code": _code, "__module__": __name__})
    _BY_CODE[int(_code)] = _cls
    globals()[_cls.__name__] = _cls
del _code, _cls


class KafkaTimeoutError(RequestTimedOutError):  # noqa: F821 - defined above
    """Something did not complete within its configured time (Java's TimeoutException)."""


class KafkaConnectionError(NetworkExceptionError):  # noqa: F821
    """A broker connection failed or closed with requests in flight."""


class NoBrokersAvailable(KafkaConnectionError):
    """None of the bootstrap servers (or known brokers) could be reached."""


class IllegalStateError(KafkaError):
    """The client was used in a state that does not allow the call (closed, not subscribed...)."""


class SerializationError(KafkaError):
    """A key or value serializer failed."""


class CommitFailedError(KafkaError):
    """The group rebalanced before the commit (Java's CommitFailedException)."""

    default_code = ErrorCode.REBALANCE_IN_PROGRESS


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto.offset.reset`` is "none"."""

    default_code = ErrorCode.OFFSET_OUT_OF_RANGE


def error_class(code: int) -> type:
    return _BY_CODE.get(int(code), KafkaError)


def for_code(code: int, message: str | None = None) -> KafkaError:
    """The ``KafkaError`` subclass instance for a response's error code."""
    cls = _BY_CODE.get(int(code))
    if cls is None:
        return KafkaError(message, int(code))
    return cls(message)


def raise_for_code(code: int, message: str | None = None) -> None:
    if code:
        raise for_code(code, message)
