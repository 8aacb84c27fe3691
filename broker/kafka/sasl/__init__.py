"""SASL on the Kafka listener (kafka-security.md §3): the handshake state machine Kafka's
SaslServerAuthenticator runs before any API is served (authenticator.py), and the mechanisms
PLAIN (plain.py, users from the listener's JAAS config, jaas.py) and SCRAM-SHA-256/512
(scram.py, credentials from the metadata image); a listener's settings in settings.py. All
of it is sans-I/O: frames in, what to answer and whether to close out; broker/kafka/server.py
does the reading and writing."""
