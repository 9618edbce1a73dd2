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


def test_subscribe_pattern_is_found_anywhere_in_a_name_as_sparks_admin_path_finds_it():
    """Spark's SubscribePatternStrategy (Admin path, Spark's default since
    3.4) keeps a topic when the regex is found in its name (findFirstIn),
    internal topics left out; an anchored regex matches whole names."""
    names = ["events", "events-upper", "old-events", "metrics", "__consumer_offsets", "__transaction_state",
             "__user-topic"]
    assert k.pattern_topics("events", names) == ["events", "events-upper", "old-events"]
    assert k.pattern_topics("^events$", names) == ["events"]
    assert k.pattern_topics("e.*s", names) == ["events", "events-upper", "metrics", "old-events"]
    assert k.pattern_topics("__", names) == ["__user-topic"]   # only Kafka's internal topics are left out


def test_java_security_names_reach_librdkafka_in_its_own(tmp_path):
    """The kafka.* security settings a Spark user gives Spark's connector
    (Java's names) become librdkafka's, and librdkafka builds a handle with
    them (it loads the certificates and key at creation); librdkafka's own
    names pass unchanged."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from support.certs import make_certs

    certs = make_certs(tmp_path)
    stores = certs.java_stores("reader", "/CN=reader")
    java = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                'username="spark" password="spark-secret";',
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores.keystore_p12),
            "ssl.keystore.password": stores.password, "ssl.key.password": stores.password,
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(stores.truststore_p12),
            "ssl.truststore.password": stores.password, "ssl.endpoint.identification.algorithm": "",
            "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}
    out = k.librdkafka_security(java)
    assert out["sasl.username"] == "spark" and out["sasl.password"] == "spark-secret"
    assert out["ssl.endpoint.identification.algorithm"] == "none"
    assert out["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert out["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert "BEGIN CERTIFICATE" in out["ssl.certificate.pem"]
    assert not {key for key in out if "truststore" in key or "keystore" in key or key in (
        "sasl.jaas.config", "ssl.enabled.protocols")}
    cert, key = certs.client("reader", "/CN=reader")
    (tmp_path / "reader.pem").write_text(key.read_text() + cert.read_text())
    pem = k.librdkafka_security({"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                                 "ssl.keystore.location": str(tmp_path / "reader.pem"),
                                 "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert)})
    assert pem == {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
                   "ssl.certificate.location": str(tmp_path / "reader.pem"),
                   "ssl.key.location": str(tmp_path / "reader.pem")}
    native = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
              "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    assert k.librdkafka_security(native) == native
    for config in (out, pem, native):
        confluent_kafka.Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "log_level": 0,
                                  **config}).close()
