"""A throw-away certificate authority and a server certificate for 127.0.0.1, made with openssl."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA's certificate (PEM): what clients trust
    server: Path  # the server's PKCS#8 key and its certificate (PEM), as Kafka's PEM keystore takes them
    other_ca: Path  # a CA that signed nothing here: a client trusting only it must refuse the server


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> Certificates:
    if shutil.which("openssl") is None:
        import pytest

        pytest.skip("openssl not installed")
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("ca", "other"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=emgas test {name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=directory)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "server.key", cwd=directory)
    _openssl("req", "-new", "-key", "server.key", "-subj", "/CN=localhost", "-out", "server.csr", cwd=directory)
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
             "-extfile", "san.ext", "-out", "server.crt", cwd=directory)
    keystore = directory / "server-keystore.pem"
    keystore.write_text((directory / "server.key").read_text() + (directory / "server.crt").read_text())
    return Certificates(directory / "ca.pem", keystore, directory / "other.pem")
