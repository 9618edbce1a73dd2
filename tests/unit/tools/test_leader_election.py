"""kafkapy-leader-election's option rules and JSON file, as Kafka 3.9's
LeaderElectionCommand checks them (no broker: every case fails before a
connection; the elections themselves are in tests/system/test_rolling_operations.py)."""

from __future__ import annotations

import pytest

from kafkapy.tools._cli import ToolError
from kafkapy.tools.leader_election import main, parse_election_json


@pytest.mark.parametrize("argv, message", [
    (["--election-type", "preferred", "--all-topic-partitions"], "Missing required option(s): bootstrap-server"),
    (["--bootstrap-server", "h:1", "--all-topic-partitions"], "Missing required option(s): election-type"),
    (["--bootstrap-server", "h:1", "--election-type", "fast", "--all-topic-partitions"],
     "must be one of [PREFERRED, UNCLEAN]"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred"],
     "One and only one of the following options is required"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--all-topic-partitions", "--topic", "t",
      "--partition", "0"], "One and only one of the following options is required"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"],
     "Missing required option(s): partition"),
])
def test_option_rules(argv, message, capsys):
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_election_json():
    assert parse_election_json('{"partitions": [{"topic": "b", "partition": 1}, {"topic": "a", "partition": 0}]}') \
        == [("a", 0), ("b", 1)]
    for text, message in [("{}", "empty"), ('{"version": 1}', 'missing "partitions"'), ("[", "not a valid JSON"),
                          ('{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}',
                           "duplicate partitions: a-0"),
                          ('{"partitions": [{"topic": "a"}]}', "invalid entry")]:
        with pytest.raises(ToolError, match=message.replace("(", r"\(")):
            parse_election_json(text)
