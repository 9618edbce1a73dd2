"""The Spark source's option rules (Spark's KafkaSourceProvider), without Spark or a broker."""

from __future__ import annotations

import pytest

from kafkapy.spark import _kafka as k


def test_preference_timestamp_then_by_timestamp_then_offsets():
    both = {"startingoffsets": "earliest", "startingoffsetsbytimestamp": '{"t": {"0": 5}}',
            "startingtimestamp": "7"}
    assert k.offset_spec(both, ending=False, default="latest") == k.TimestampSpec(7, "error")
    del both["startingtimestamp"]
    assert k.offset_spec(both, ending=False, default="latest") == k.TimestampSpec({("t", 0): 5}, "error")
    del both["startingoffsetsbytimestamp"]
    assert k.offset_spec(both, ending=False, default="latest") == "earliest"
    assert k.offset_spec({}, ending=True, default="latest") == "latest"
    assert k.offset_spec({"endingtimestamp": "9", "startingoffsetsbytimestampstrategy": "LATEST"},
                         ending=True, default="latest") == k.TimestampSpec(9, "latest")


@pytest.mark.parametrize("options, message", [
    ({"startingtimestamp": "soon"}, "Expected a single long value, got soon"),
    ({"startingoffsetsbytimestampstrategy": "first"}, "must be 'error' or 'latest'"),
    ({"startingoffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"endingoffsets": '{"t": {"1": -2}}'}, "ending offset for t-1 can't be earliest for batch queries"),
    ({"minpartitions": "0"}, "minPartitions must be positive"),
    ({"minoffsetspertrigger": "11", "maxoffsetspertrigger": "10"},
     r"The value of minOffsetPerTrigger\(11\) is higher than the maxOffsetsPerTrigger\(10\)\."),
])
def test_batch_options_refused_with_sparks_words(options, message):
    with pytest.raises(k.KafkaSourceError, match=message):
        k.validate_batch_options(options)


def test_stream_options():
    with pytest.raises(k.KafkaSourceError, match="ending offset not valid in streaming queries"):
        k.validate_stream_options({"endingoffsets": "latest"})
    with pytest.raises(k.KafkaSourceError, match="ending timestamp not valid in streaming queries"):
        k.validate_stream_options({"endingoffsetsbytimestamp": "{}"})
    k.validate_stream_options({"startingoffsets": "latest", "minoffsetspertrigger": "5"})


@pytest.mark.parametrize("text, ms", [("15m", 900_000), ("30s", 30_000), ("250ms", 250), ("2h", 7_200_000),
                                      ("40", 40), ("1 min", 60_000)])
def test_max_trigger_delay(text, ms):
    assert k.max_trigger_delay_ms({"maxtriggerdelay": text}) == ms
    assert k.max_trigger_delay_ms({}) == 900_000   # Spark's default


def test_max_trigger_delay_refuses_garbage():
    with pytest.raises(k.KafkaSourceError, match="maxTriggerDelay"):
        k.max_trigger_delay_ms({"maxtriggerdelay": "soon"})


def test_data_loss_report_fails_or_warns(caplog):
    with pytest.raises(k.KafkaSourceError, match=r"are gone\. .*set the source option \"failOnDataLoss\" to \"false\""):
        k.report_data_loss({}, "Set(t-0) are gone")
    k.report_data_loss({"failondataloss": "false"}, "Set(t-0) are gone")
    assert "If you want your streaming query to fail" in caplog.text
