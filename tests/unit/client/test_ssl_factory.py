"""kafkapy.client.ssl_factory without sockets: ssl.cipher.suites as the JVM
applies it, and Kafka's suite names in OpenSSL's spelling."""

from __future__ import annotations

import pytest


def test_cipher_suites_restrict_tls13_and_drop_protocols_left_without_a_suite():
    """ssl.cipher.suites as the JVM applies it: TLS 1.3 names restrict TLS 1.3
    (the ssl module alone cannot), a protocol with no listed suite is not
    negotiated, and a list that leaves no enabled protocol is refused."""
    import ssl

    from kafkapy.client.ssl_factory import SslConfigError, apply_cipher_suites

    both = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    apply_cipher_suites(ctx, both, ["TLS_AES_128_GCM_SHA256"], "listener SSL")
    tls13 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.3"]
    assert tls13 == ["TLS_AES_128_GCM_SHA256"]
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    apply_cipher_suites(ctx, both, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"], "listener SSL")
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-RSA-AES128-GCM-SHA256"]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    apply_cipher_suites(ctx, both, [], "listener SSL")  # no list: the defaults, both protocols
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(SslConfigError, match="ssl.cipher.suites"):
        apply_cipher_suites(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), [ssl.TLSVersion.TLSv1_2],
                            ["TLS_AES_128_GCM_SHA256"], "listener SSL")
    with pytest.raises(SslConfigError, match="ssl.cipher.suites"):
        apply_cipher_suites(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), both, ["TLS_NO_SUCH_SUITE"], "listener SSL")
    # An unknown name beside known ones is refused too (OpenSSL alone would skip it).
    with pytest.raises(SslConfigError, match="unsupported cipher suite TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA257"):
        apply_cipher_suites(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), both,
                            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA257"],
                            "listener SSL")
    # The inter-broker client's context (a client one, host names checked) takes them too.
    client = ssl.create_default_context()
    apply_cipher_suites(client, both, ["TLS_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"],
                        "listener INTERNAL")
    assert [c["name"] for c in client.get_ciphers() if c["protocol"] == "TLSv1.3"] == ["TLS_AES_256_GCM_SHA384"]
    assert (client.minimum_version, client.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_kafka_cipher_suite_names_in_openssls_spelling():
    """ssl.cipher.suites in Kafka's (IANA) names: each TLS 1.2 suite openssl
    knows by a standard name converts to openssl's own name for it."""
    import shutil
    import subprocess

    from kafkapy.client.ssl_factory import openssl_cipher_name

    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI")
    listing = subprocess.run(["openssl", "ciphers", "-stdname", "ALL:@SECLEVEL=0"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    converted = 0
    for line in listing.splitlines():
        standard, _, name = line.split()[:3]
        if openssl_cipher_name(standard) != standard:
            assert openssl_cipher_name(standard) == name, standard
            converted += 1
    assert converted >= 20
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
    assert openssl_cipher_name("ECDHE-RSA-AES128-SHA") == "ECDHE-RSA-AES128-SHA"  # openssl's already
    assert openssl_cipher_name("TLS_AES_128_GCM_SHA256") == "TLS_AES_128_GCM_SHA256"  # TLS 1.3


def test_one_builder_for_both_ends_of_a_mutual_tls_handshake(tmp_path):
    """A listener's context (server mode, the broker's keys: inline PEM key
    store, encrypted key, client certificates required) and a tool's (client
    mode, a Java client's properties as text, librdkafka's ssl.ca.location)
    from the same builder complete a handshake with each other."""
    import ssl

    from kafkapy.client.security import ClientSecurity
    from kafkapy.client.ssl_factory import create_context
    from support.certs import make_certs
    from support.tls_memory import memory_tls

    certs = make_certs(tmp_path)
    client_cert, client_key = certs.client("tool", "/CN=tool")
    (tmp_path / "tool.pem").write_text(client_key.read_text() + client_cert.read_text())
    listener = {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
                "ssl.keystore.certificate.chain": certs.server_cert.read_text(),
                "ssl.keystore.key": certs.server_key_encrypted.read_text(), "ssl.key.password": certs.key_password,
                "ssl.truststore.location": str(certs.ca_cert), "ssl.client.auth": "required",
                "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"], "ssl.cipher.suites": []}
    server = create_context("server", listener.get, "listener SSL")
    assert server.verify_mode == ssl.CERT_REQUIRED and not server.check_hostname
    tool = ClientSecurity.from_client_properties({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
                                                  "ssl.keystore.location": str(tmp_path / "tool.pem"),
                                                  "ssl.enabled.protocols": "TLSv1.2"})
    assert tool.ssl_context.check_hostname  # Kafka's default https
    tls = memory_tls(server, tool.ssl_context)
    assert tls.server.version() == "TLSv1.2" and tls.server.getpeercert()["subject"] == ((("commonName", "tool"),),)
    for algorithm in ("", "none"):  # Java's and librdkafka's "no host name check"
        props = {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": algorithm}
        assert not ClientSecurity.from_client_properties(props).ssl_context.check_hostname


def test_bad_settings_name_their_key_and_never_the_password(tmp_path):
    from kafkapy.client.ssl_factory import SslConfigError, create_context

    with pytest.raises(SslConfigError, match="a TLS listener needs ssl.keystore.location") as err:
        create_context("server", {"ssl.key.password": "hunter2"}.get, "listener SSL")
    assert err.value.key == "ssl.keystore.location"
    with pytest.raises(SslConfigError, match="the client cannot load its trust store") as err:
        create_context("client", {"ssl.truststore.location": str(tmp_path / "missing.pem"),
                                  "ssl.key.password": "hunter2"}.get, "the client")
    assert err.value.key == "ssl.truststore.location" and "hunter2" not in str(err.value)
    with pytest.raises(SslConfigError, match="supported protocols are TLSv1.2, TLSv1.3"):
        create_context("client", {"ssl.enabled.protocols": "TLSv1.1"}.get, "the client")


@pytest.fixture(scope="module")
def java_certs(tmp_path_factory):
    """Certificates and client "writer"'s Java stores (keytool takes ~2 s a store here)."""
    from support.certs import make_certs
    certs = make_certs(tmp_path_factory.mktemp("java-stores"))
    return certs, certs.java_stores("writer", "/CN=writer")


def test_client_stores_in_javas_names_and_librdkafkas_complete_a_mutual_tls_handshake(java_certs, tmp_path):
    """Every way a client names its key and trust stores (Java's PKCS12 and
    JKS files as keytool writes them, with their passwords; Java's PEM key store;
    librdkafka's certificate and key locations, inline PEM, and its PKCS12
    ssl.keystore.location) gives a context a server requiring client
    certificates accepts, presenting the client's own certificate."""
    from kafkapy.client.security import ClientSecurity
    from kafkapy.client.ssl_factory import create_context
    from support.tls_memory import memory_tls

    certs, stores = java_certs
    cert, key = certs.client("writer", "/CN=writer")
    (tmp_path / "writer.pem").write_text(key.read_text() + cert.read_text())
    server = create_context("server", {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore),
                                       "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert),
                                       "ssl.client.auth": "required"}.get, "listener SSL")
    java_p12 = {"ssl.keystore.location": str(stores.keystore_p12), "ssl.keystore.password": stores.password,
                "ssl.key.password": stores.password, "ssl.keystore.type": "PKCS12",
                "ssl.truststore.location": str(stores.truststore_p12), "ssl.truststore.password": stores.password,
                "ssl.truststore.type": "PKCS12"}
    variants = {
        "java PKCS12": java_p12,
        "java JKS": {"ssl.keystore.location": str(stores.keystore_jks), "ssl.keystore.password": stores.password,
                     "ssl.truststore.location": str(stores.truststore_jks),
                     "ssl.truststore.password": stores.password},
        "java PKCS12 under the JKS default type": {k: v for k, v in java_p12.items() if not k.endswith(".type")},
        "java PEM": {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "writer.pem"),
                     "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert)},
        "librdkafka files": {"ssl.certificate.location": str(cert), "ssl.key.location": str(key),
                             "ssl.ca.location": str(certs.ca_cert)},
        "librdkafka inline": {"ssl.certificate.pem": cert.read_text(), "ssl.key.pem": key.read_text(),
                              "ssl.ca.pem": certs.ca_cert.read_text()},
        "librdkafka PKCS12": {"ssl.keystore.location": str(stores.keystore_p12),
                              "ssl.keystore.password": stores.password, "ssl.ca.location": str(certs.ca_cert)},
    }
    for name, props in variants.items():
        client = ClientSecurity.from_client_properties({"security.protocol": "SSL", **props})
        tls = memory_tls(server, client.ssl_context)
        assert tls.server.getpeercert()["subject"] == ((("commonName", "writer"),),), name


def test_client_stores_refused_with_their_key_and_never_the_password(java_certs):
    """A JKS store with a wrong store or key password, a PKCS12 store with
    the wrong password, and ssl.keystore.type=PEM over a PKCS12 file each
    raise SslConfigError naming the key, without the password."""
    from kafkapy.client.ssl_factory import SslConfigError, create_context

    _certs, stores = java_certs
    cases = [({"ssl.keystore.location": str(stores.keystore_jks), "ssl.keystore.password": "hunter2"},
              "ssl.keystore.location", "the JKS store's integrity check failed"),
             ({"ssl.keystore.location": str(stores.keystore_jks), "ssl.keystore.password": stores.password,
               "ssl.key.password": "hunter2"}, "ssl.keystore.location", "cannot unseal the JKS store's key"),
             ({"ssl.keystore.location": str(stores.keystore_p12), "ssl.keystore.password": "hunter2"},
              "ssl.keystore.location", "cannot open the PKCS#12 store"),
             ({"ssl.keystore.location": str(stores.keystore_p12), "ssl.keystore.type": "PEM",
               "ssl.keystore.password": "hunter2"}, "ssl.keystore.type", "is not PEM"),
             ({"ssl.truststore.location": str(stores.truststore_p12), "ssl.truststore.password": "hunter2"},
              "ssl.truststore.location", "cannot open the PKCS#12 store")]
    for props, key, text in cases:
        with pytest.raises(SslConfigError, match=text) as err:
            create_context("client", props.get, "the client")
        assert err.value.key == key and "hunter2" not in str(err.value) and stores.password not in str(err.value)


def test_a_listener_reads_javas_stores_as_a_kafka_broker_does(java_certs):
    """A listener given the stores a Kafka broker is given: JKS files with
    the types left at Kafka's default (JKS), PKCS12 ones under PKCS12 or
    under the JKS name (Java 9+ reads either), the key's password defaulting
    to the store's. Each context presents the server certificate, requires
    the client's and checks it against the CA of the trust store."""
    from kafkapy.client.security import ClientSecurity
    from kafkapy.client.ssl_factory import create_context
    from support.tls_memory import memory_tls

    certs, client_stores = java_certs
    stores = certs.server_java_stores(client_stores.password)
    password = stores.password
    cert, key = certs.client("writer", "/CN=writer")
    client = ClientSecurity.from_client_properties({
        "security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
        "ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    variants = {
        "JKS, types unset": {"ssl.keystore.location": str(stores.keystore_jks), "ssl.keystore.password": password,
                             "ssl.truststore.location": str(stores.truststore_jks),
                             "ssl.truststore.password": password},
        "JKS, trust store without its password": {"ssl.keystore.location": str(stores.keystore_jks),
                                                  "ssl.keystore.password": password, "ssl.key.password": password,
                                                  "ssl.truststore.location": str(stores.truststore_jks)},
        "PKCS12": {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores.keystore_p12),
                   "ssl.keystore.password": password, "ssl.truststore.type": "PKCS12",
                   "ssl.truststore.location": str(stores.truststore_p12), "ssl.truststore.password": password},
        "PKCS12 under the JKS name": {"ssl.keystore.location": str(stores.keystore_p12),
                                      "ssl.keystore.password": password,
                                      "ssl.truststore.location": str(stores.truststore_jks),
                                      "ssl.truststore.password": password},
    }
    for name, props in variants.items():
        server = create_context("server", {**props, "ssl.client.auth": "required"}.get, "listener SSL")
        tls = memory_tls(server, client.ssl_context)
        assert tls.server.getpeercert()["subject"] == ((("commonName", "writer"),),), name
        assert dict(x[0] for x in tls.client.getpeercert()["subject"])["commonName"] == "localhost", name


def test_a_listener_refuses_a_store_that_is_not_its_type_naming_the_key_never_the_password(java_certs):
    """Kafka's checks of a listener's stores: the default type JKS over a PEM
    file, PEM over a JKS file, a store given inline under a binary type, an
    unknown type, a JKS key store without its password, and a wrong store or
    key password each stop the listener with the key that is wrong."""
    from kafkapy.client.ssl_factory import SslConfigError, create_context

    certs, client_stores = java_certs
    stores = certs.server_java_stores(client_stores.password)
    jks = {"ssl.keystore.location": str(stores.keystore_jks), "ssl.keystore.password": stores.password}
    cases = [
        ({"ssl.keystore.location": str(certs.server_keystore)}, "ssl.keystore.type", "is PEM, not a JKS store"),
        ({"ssl.keystore.type": "PEM", **jks}, "ssl.keystore.type", "is not PEM"),
        ({"ssl.keystore.certificate.chain": certs.server_cert.read_text(),
          "ssl.keystore.key": certs.server_key.read_text()}, "ssl.keystore.type", "a store given inline is PEM"),
        ({"ssl.keystore.type": "BKS", **jks}, "ssl.keystore.type", "one of JKS, PKCS12, PEM"),
        ({"ssl.keystore.location": str(stores.keystore_jks)}, "ssl.keystore.password", "needs its password"),
        ({**jks, "ssl.keystore.password": "hunter2"}, "ssl.keystore.location", "integrity check failed"),
        ({**jks, "ssl.key.password": "hunter2"}, "ssl.keystore.location", "cannot unseal the JKS store's key"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores.keystore_p12),
          "ssl.keystore.password": "hunter2"}, "ssl.keystore.location", "cannot open the PKCS#12 store"),
        ({**jks, "ssl.truststore.location": str(certs.ca_cert)}, "ssl.truststore.type", "is PEM, not a JKS store"),
    ]
    for props, key, text in cases:
        with pytest.raises(SslConfigError, match=text) as err:
            create_context("server", props.get, "listener SSL")
        assert err.value.key == key, (props, err.value)
        assert "hunter2" not in str(err.value) and stores.password not in str(err.value)
