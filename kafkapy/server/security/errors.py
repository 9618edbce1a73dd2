"""The failure of a SASL authentication, raised by every server mechanism
(``sasl``'s PLAIN and SCRAM, ``oauthbearer``) and answered by ``sasl``'s
authenticator as SASL_AUTHENTICATION_FAILED (Kafka's
SaslAuthenticationException). Below both, so neither imports the other for it.
"""


class SaslAuthenticationFailed(Exception):
    """Bad credentials; the message goes to the client (never a password)."""
