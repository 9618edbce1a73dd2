"""Securing the broker's ZooKeeper session, as Kafka 3.9 does it: the
``ZkSecurity`` every ZooKeeper client of the broker is built with
(``zk_client``; the supervisor's cluster-id check, the controller child, the
workers' admin path).

* **SASL** comes, as in Kafka, from a JAAS file's ``Client`` section (another
  name with ``-Dzookeeper.sasl.clientconfig=NAME``), the file named by the JVM
  system property ``java.security.auth.login.config``. Kafka's scripts pass
  system properties in the ``KAFKA_OPTS`` environment variable, so kafkapy reads
  them there::

      KAFKA_OPTS="-Djava.security.auth.login.config=/etc/kafka/zookeeper_client_jaas.conf"

      Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka"
        password="kafka-secret";
      };

  DigestLoginModule is DIGEST-MD5 (kazoo through pure-sasl). Kerberos
  (Krb5LoginModule) is refused: kafkapy has no GSSAPI. As in Kafka's
  JaasUtils, ``-Dzookeeper.sasl.client=false`` with a Client section present
  is an error, and a missing file named by the property is one too.
* **TLS** with ``zookeeper.ssl.client.enable`` and the ``zookeeper.ssl.*``
  keys (PEM stores, as kafkapy's listeners; ZooKeeper reads PEM too).
* **ACLs**: ``zookeeper.set.acl=true`` needs SASL or a TLS client
  certificate (Kafka's KafkaZkClient.createZkClient raises SecurityException
  otherwise: ZooKeeper would refuse creator-only ACLs from an anonymous session).

Pure: reads the config, the environment and the JAAS file; opens no socket.
"""

from __future__ import annotations

import os
import re
import shlex
import ssl

from kafkapy.client.ssl_factory import TLS13_SUITES, openssl_cipher_name
from kafkapy.metadata.zk.client import ZkClient, ZkSecurity, ZkTls
from kafkapy.server.config.types import ConfigException, secret
from kafkapy.server.security.sasl import parse_jaas_config

# Kafka's JaasUtils names.
JAVA_LOGIN_CONFIG_PARAM = "java.security.auth.login.config"
ZK_SASL_CLIENT = "zookeeper.sasl.client"
ZK_LOGIN_CONTEXT_NAME_KEY = "zookeeper.sasl.clientconfig"
DEFAULT_ZK_LOGIN_CONTEXT_NAME = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"

_NO_PROTOCOL = {"TLSv1.2": ssl.OP_NO_TLSv1_2, "TLSv1.3": ssl.OP_NO_TLSv1_3}
_NON_PEM_EXTENSIONS = (".jks", ".p12", ".pfx", ".pkcs12", ".bcfks")


def system_properties(environ=None) -> dict:
    """The ``-Dname=value`` JVM system properties in ``KAFKA_OPTS`` (Kafka's
    kafka-run-class.sh passes it to java), shell-quoted as there."""
    environ = os.environ if environ is None else environ
    props = {}
    try:
        words = shlex.split(environ.get("KAFKA_OPTS", ""))
    except ValueError as exc:
        raise ConfigException(f"KAFKA_OPTS cannot be read: {exc}") from None
    for word in words:
        if word.startswith("-D"):
            name, _, value = word[2:].partition("=")
            props[name] = value
    return props


_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_SECTION = re.compile(r"\s*([A-Za-z_][\w.$-]*)\s*\{(.*?)\}\s*;", re.S)


def parse_jaas_file(text: str) -> dict:
    """A JAAS login configuration file (``Name { module flag k="v"; ... };``, Java
    comments allowed) as ``{section name: [(module, flag, options)]}``."""
    text = _COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)
    sections, pos = {}, 0
    while text[pos:].strip():
        m = _SECTION.match(text, pos)
        if m is None:
            raise ValueError("invalid JAAS file: expected 'Name { ... };'")  # passwords stay unshown
        sections[m.group(1)] = parse_jaas_config(m.group(2))
        pos = m.end()
    return sections


def sasl_options(environ=None) -> dict | None:
    """pure-sasl options for the ZooKeeper session from the JAAS ``Client`` section
    (Kafka's JaasUtils.isZkSaslEnabled), or None when there is none."""
    props = system_properties(environ)
    path = props.get(JAVA_LOGIN_CONFIG_PARAM)
    if not path:
        return None
    context = props.get(ZK_LOGIN_CONTEXT_NAME_KEY, DEFAULT_ZK_LOGIN_CONTEXT_NAME)
    where = f"{JAVA_LOGIN_CONFIG_PARAM}={path}"
    try:
        with open(path, encoding="utf-8") as f:
            sections = parse_jaas_file(f.read())
    except OSError as exc:
        raise ConfigException(f"{where}: the JAAS file cannot be read: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigException(f"{where}: {exc}") from None
    entries = sections.get(context)
    if entries is None:
        return None
    if props.get(ZK_SASL_CLIENT, "true").lower() != "true":
        raise ConfigException(f"JAAS configuration is present, but system property {ZK_SASL_CLIENT} is set "
                              f"to false, which disables SASL in the ZooKeeper client ({where})")
    for module, _flag, options in entries:
        if module == DIGEST_LOGIN_MODULE:
            if "username" not in options or "password" not in options:
                raise ConfigException(f"{where}: {context}'s {DIGEST_LOGIN_MODULE} needs username and password")
            return {"mechanism": "DIGEST-MD5", "username": options["username"], "password": options["password"],
                    "service": props.get("zookeeper.sasl.client.username", "zookeeper")}
    modules = ", ".join(module for module, _, _ in entries)
    reason = " (kafkapy has no Kerberos/GSSAPI)" if KRB5_LOGIN_MODULE in modules else ""
    raise ConfigException(f"{where}: {context} section has no {DIGEST_LOGIN_MODULE} ({modules}){reason}")


def _pem_store(config, kind: str) -> str | None:
    location = config[f"zookeeper.ssl.{kind}.location"]
    store_type = config[f"zookeeper.ssl.{kind}.type"]
    key = f"zookeeper.ssl.{kind}.type"
    if store_type is not None and store_type.upper() != "PEM":
        raise ConfigException(key, store_type, "kafkapy reads PEM stores only (convert with keytool/openssl)")
    if store_type is None and location and location.lower().endswith(_NON_PEM_EXTENSIONS):
        raise ConfigException(f"zookeeper.ssl.{kind}.location", location,
                              "kafkapy reads PEM stores only (set a .pem file or type PEM)")
    return location


def tls_settings(config) -> ZkTls | None:
    """``zookeeper.ssl.*`` as kazoo takes them, or None without ``zookeeper.ssl.client.enable``."""
    if not config["zookeeper.ssl.client.enable"]:
        return None
    keystore = _pem_store(config, "keystore")
    truststore = _pem_store(config, "truststore")
    enabled = config["zookeeper.ssl.enabled.protocols"] or [config["zookeeper.ssl.protocol"]]
    unknown = [p for p in enabled if p not in _NO_PROTOCOL]
    if unknown:
        key = "zookeeper.ssl.enabled.protocols" if config["zookeeper.ssl.enabled.protocols"] \
            else "zookeeper.ssl.protocol"
        raise ConfigException(key, ",".join(enabled), "TLSv1.2 and TLSv1.3 are supported")
    options = 0
    for protocol, flag in _NO_PROTOCOL.items():
        if protocol not in enabled:
            options |= flag
    suites = [s for s in (config["zookeeper.ssl.cipher.suites"] or []) if s not in TLS13_SUITES]
    algorithm = config["zookeeper.ssl.endpoint.identification.algorithm"] or ""
    password = secret(config["zookeeper.ssl.keystore.password"])
    return ZkTls(ca=truststore, certfile=keystore, keyfile=keystore, keyfile_password=password or None,
                 check_hostname=algorithm.lower() == "https", options=options,
                 ciphers=":".join(openssl_cipher_name(s) for s in suites) or None)


def zk_security(config, environ=None) -> ZkSecurity:
    sasl = sasl_options(environ)
    tls = tls_settings(config)
    set_acl = bool(config["zookeeper.set.acl"])
    if set_acl and sasl is None and (tls is None or not tls.certfile):
        raise ConfigException(
            "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at least "
            "zookeeper.ssl.client.enable and zookeeper.ssl.keystore.location was not present and no JAAS "
            f"'{DEFAULT_ZK_LOGIN_CONTEXT_NAME}' section was found through -D{JAVA_LOGIN_CONFIG_PARAM} in KAFKA_OPTS")
    return ZkSecurity(set_acl=set_acl, sasl=sasl, tls=tls)


def zk_client(config, environ=None) -> ZkClient:
    """The broker's ZooKeeper client: ``zookeeper.connect`` and its timeouts, secured
    as configured (not yet connected)."""
    return ZkClient(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                    config["zookeeper.connection.timeout.ms"], security=zk_security(config, environ))
