"""Topic-level rules shared by CreateTopics, Metadata auto-creation and DeleteTopics."""

import re

from kafkapy.protocol.errors import ErrorCode

# Kafka's Topic.validate: legal characters, at most 249 of them (the
# partition directory name adds "-<partition>" and must fit 255 bytes).
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicError(Exception):
    def __init__(self, error_code: int, message: str):
        super().__init__(message)
        self.error_code = int(error_code)
        self.message = message


def topic_name_error(name) -> str | None:
    """Kafka's reason a topic name is invalid, or None if it is valid."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return (f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                f"topic name: {name}")
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
                "alphanumerics, '.', '_' and '-'")
    return None


def check_topic_name(name) -> None:
    reason = topic_name_error(name)
    if reason:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
