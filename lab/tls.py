"""The twin's eAPI certificate: self-signed, made at `lab up` for every switch address (as an EOS switch serves
eAPI over HTTPS with its own self-signed certificate until an operator installs one)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(folder: Path, hosts: Sequence[str], name: str = "fabricd-twin") -> ssl.SSLContext:
    """A server context with a new self-signed certificate for `hosts` (IP addresses), written to folder/eapi.crt
    and folder/eapi.key (0600)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(h)) for h in hosts]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    crt, pem = folder / "eapi.crt", folder / "eapi.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))  # fmt: skip
    pem.chmod(0o600)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, pem)
    return ctx
