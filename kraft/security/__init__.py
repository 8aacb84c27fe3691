"""Transport security and authorization: TLS/mTLS credentials for every listener and client
(`tls`), the principal a caller authenticates as (`principal`), who may do what
(`authorizer`), and a test certificate authority for demos and tests (`certs`)."""
