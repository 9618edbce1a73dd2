"""``kafkapy-server-start CONFIG [--override key=value ...]`` (and ``python -m kafkapy``).

As Kafka's ``kafka-server-start.sh``: the properties file, then each
``--override`` on top. A bad value fails start-up with one line naming the
key; unknown keys are logged as warnings.
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import sys

from kafkapy import __version__


class KafkaFormatter(logging.Formatter):
    """Kafka's log4j layout: ``[2026-11-21 12:00:00,123] INFO message (logger)``."""

    def format(self, record):
        record.message = record.getMessage()
        text = f"[{self.formatTime(record)}] {record.levelname} {record.message} ({record.name})"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text

    def formatTime(self, record, datefmt=None):
        import time

        t = time.localtime(record.created)
        return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{int(record.msecs):03d}"


_KafkaFormatter = KafkaFormatter

LOG_CONFIG_ENV = "KAFKAPY_LOG_CONFIG"
LOG_CONFIG_NAME = "logging.ini"


def log_config_path(properties_path: str | None = None) -> str | None:
    """The logging config to load: $KAFKAPY_LOG_CONFIG, else logging.ini next to
    the server.properties, else None (built-in defaults)."""
    path = os.environ.get(LOG_CONFIG_ENV)
    if path:
        return path
    if properties_path:
        candidate = os.path.join(os.path.dirname(os.path.abspath(properties_path)), LOG_CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
    return None


def setup_logging(level: str = "INFO", properties_path: str | None = None) -> str | None:
    """Configure logging (see config/logging.ini); returns the file used, if any.

    A logging file that cannot be read or parsed is reported and the
    built-in defaults are used: a typo in logging must not stop a broker.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KafkaFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Per-request logging is off by default, as Kafka's kafka.request.logger.
    logging.getLogger("kafkapy.request").setLevel("WARNING")
    path = log_config_path(properties_path)
    if path is None:
        return None
    try:
        if not os.path.isfile(path):
            raise FileNotFoundError(path)
        logging.config.fileConfig(path, disable_existing_loggers=False)
    except Exception as exc:  # configparser, import and value errors alike
        root.handlers[:] = [handler]
        logging.getLogger("kafkapy.server").error(
            "cannot load logging config %s (%s); using the defaults", path, exc)
        return None
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kafkapy-server-start",
                                     description="Start a kafkapy broker.")
    parser.add_argument("config", help="server.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override a property of the file (repeatable)")
    parser.add_argument("--version", action="version", version=f"kafkapy {__version__}")
    args = parser.parse_args(argv)
    setup_logging(properties_path=args.config)
    from kafkapy.server.config.broker_config import BrokerConfig
    from kafkapy.server.config.properties import parse_overrides
    from kafkapy.server.config.types import ConfigException

    try:
        overrides = parse_overrides(args.override)
        config = BrokerConfig.from_file(args.config, overrides)
    except ConfigException as exc:
        print(f"kafkapy-server-start: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kafkapy-server-start: cannot read {args.config}: {exc.strerror}", file=sys.stderr)
        return 1
    from kafkapy.server.supervisor import Supervisor

    try:
        return Supervisor(config).run()
    except OSError as exc:
        logging.getLogger("kafkapy.server").error("start-up failed: %s", exc)
        return 1
    except SystemExit as exc:
        if isinstance(exc.code, str):
            logging.getLogger("kafkapy.server").error("%s", exc.code)
            return 1
        raise


if __name__ == "__main__":
    raise SystemExit(main())
