"""Kafka security settings passed through to every client we create.

`EMGAS_KAFKA__SECURITY_PROTOCOL` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
`EMGAS_KAFKA__SASL_MECHANISM` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
`EMGAS_KAFKA__SASL_USERNAME` / `__SASL_PASSWORD`, and TLS files
`EMGAS_KAFKA__SSL_CAFILE` / `__SSL_CERTFILE` / `__SSL_KEYFILE`. The same
options reach the Faust worker, the aiokafka clients (queries, publishing,
replay, topic creation) and nothing else connects to Kafka.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from emgas.streams.settings import KafkaSecurity

class _Reasons(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def connection_reasons() -> Iterator[list[str]]:
    """What aiokafka logs, and does not raise, while a client bootstraps (a
    refused password, an untrusted certificate): collected, not printed, so
    a failure can say why in one line (`unreachable`)."""
    logger = logging.getLogger("aiokafka")
    handler, propagate = _Reasons(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def unreachable(servers: str, error: BaseException, reasons: list[str], security: KafkaSecurity) -> str:
    """One line: why a client could not start against `servers`, naming the setting to check."""
    reason = next((r for r in reversed(reasons) if "Unable connect" in r or "SSL" in r or "Sasl" in r), "")
    if "SaslAuthenticationFailed" in reason or "Authentication failed" in reason:
        return (f"Kafka at {servers} refused the credentials: SASL authentication failed for user "
                f"{security.sasl_username!r} with {security.sasl_mechanism} (check EMGAS_KAFKA__SASL_USERNAME "
                "and EMGAS_KAFKA__SASL_PASSWORD)")
    if "CERTIFICATE_VERIFY_FAILED" in reason:
        detail = reason.split("certificate verify failed:", 1)[-1].split("(_ssl", 1)[0].strip()
        trusted = security.ssl_cafile or "the system's certificate authorities"
        return (f"cannot reach Kafka at {servers}: its TLS certificate is not trusted ({detail}; "
                f"EMGAS_KAFKA__SSL_CAFILE is {trusted})")
    why = reason.split(": ", 1)[-1] if reason else f"{type(error).__name__}: {error}"
    return f"cannot reach Kafka at {servers}: {why}"
