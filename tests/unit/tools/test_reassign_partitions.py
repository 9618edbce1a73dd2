"""kafkapy-reassign-partitions' pure parts: Kafka's JSON, checks, throttle lists and text."""

import pytest

from kafkapy.tools._cli import ToolError
from kafkapy.tools.reassign_partitions import (
    check_execute_args,
    current_assignment_text,
    follower_throttles,
    format_reassignment_json,
    leader_throttles,
    main,
    move_map,
    parse_reassignment_json,
    parse_topics_json,
    reassignments_text,
)


def test_json_files_as_kafka():
    assert parse_topics_json('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == ["a", "b"]
    assert parse_reassignment_json('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],'
                                   '"log_dirs":["any","any"]}]}') == [(("a", 0), [1, 2])]
    assert format_reassignment_json({("b", 1): [3], ("a", 0): [2, 1]}) == (
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2,1],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":1,"replicas":[3],"log_dirs":["any"]}]}')
    for bad, said in (("x", "not a valid JSON"), ("[1]", "not a valid JSON"),
                      ('{"version":2}', "Not supported version field value 2"),
                      ('{"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
                       "not supported by kafkapy"),
                      ('{"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":[]}]}',
                       "is different from size of log dirs list")):
        with pytest.raises(ToolError, match=said):
            parse_reassignment_json(bad)


def test_execute_checks_as_kafka():
    with pytest.raises(ToolError, match="Partition reassignment list cannot be empty"):
        check_execute_args([])
    with pytest.raises(ToolError, match="Partition replica list cannot be empty"):
        check_execute_args([(("a", 0), [])])
    with pytest.raises(ToolError, match="duplicate topic partitions: a-0"):
        check_execute_args([(("a", 0), [1]), (("a", 0), [2])])
    with pytest.raises(ToolError, match="a-0 contains multiple entries for 1"):
        check_execute_args([(("a", 0), [1, 1])])


def test_throttles_name_sources_for_leaders_and_new_replicas_for_followers():
    ongoing = {("a", 1): ([4, 1], [4], [])}  # a reassignment already running: its sources kept
    moves = move_map(ongoing, {("a", 0): [2, 3], ("a", 1): [4, 5]}, {("a", 0): [1, 2], ("a", 1): [4, 1]})
    assert moves == {"a": {0: ({1, 2}, {3}), 1: ({1}, {4, 5})}}
    assert leader_throttles(moves) == {"a": "0:1,0:2,1:1"}
    assert follower_throttles(moves) == {"a": "0:3,1:4,1:5"}


def test_text_as_kafka():
    assert reassignments_text({}) == "No partition reassignments found."
    assert reassignments_text({("a", 0): ([2, 3, 1], [3], [1]), ("a", 1): ([1, 2, 3], [3], [])}) == (
        "Current partition reassignments:\na-0: replicas: 2,3,1. adding: 3. removing: 1.\n"
        "a-1: replicas: 1,2,3. adding: 3.")
    assert current_assignment_text({("a", 0): [2]}, {("a", 0): [1], ("a", 1): [1]}).endswith(
        "\n\nSave this to use as the --reassignment-json-file option during rollback")


def test_options_as_kafka(capsys):
    assert main(["--list"]) == 1
    assert "Please specify --bootstrap-server" in capsys.readouterr().err
    assert main(["--verify", "--execute", "--bootstrap-server", "h:1"]) == 1
    assert "exactly one action" in capsys.readouterr().err
    assert main(["--execute", "--bootstrap-server", "h:1"]) == 1
    assert "reassignment-json-file" in capsys.readouterr().err
    assert main(["--list", "--bootstrap-server", "h:1", "--throttle", "5"]) == 1
    assert "Option \"[throttle]\" can't be used with action \"[list]\"" in capsys.readouterr().err
