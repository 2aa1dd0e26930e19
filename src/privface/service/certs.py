"""`privface certs`: a local development CA and a server and a client certificate (P-256, SHA-256).

Development only: the CA key sits next to the certificates. In production use certificates of your own
PKI. Private keys are written with mode 0600 (created so, never readable by others even briefly).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import PrivfaceError

FILES = ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "privface development"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, 0o600)
        f.write(data)


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, days: int, *, ca: bool = False,
          hosts: list[str] = (), usage=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, encipher_only=False,
                                          decipher_only=False), critical=True)
    else:
        b = (b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=True, encipher_only=False,
                                           decipher_only=False), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False))
        if hosts:
            b = b.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_dev_certs(out: str | os.PathLike, hosts: list[str] = ("localhost", "127.0.0.1"), *, days: int = 365,
                   client_name: str = "privface-client") -> dict[str, str]:
    """Write ca.pem/ca.key, server.pem/server.key (SANs = `hosts`) and client.pem/client.key (for mutual TLS)
    into `out`; refuses to overwrite. Returns {file name: path}."""
    out = Path(out)
    hosts = [h.strip() for h in hosts if h.strip()]
    if not hosts:
        raise PrivfaceError("--hosts needs at least one host name or IP address")
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    existing = [f for f in FILES if (out / f).exists()]
    if existing:
        raise PrivfaceError(f"{out} already holds {', '.join(existing)}; choose another --out")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("privface development CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, days, ca=True)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server = _cert(_name(hosts[0]), server_key, ca_name, ca_key, days, hosts=hosts,
                   usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client = _cert(_name(client_name), client_key, ca_name, ca_key, days, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    for stem, cert, key in (("ca", ca, ca_key), ("server", server, server_key), ("client", client, client_key)):
        _write_key(out / f"{stem}.key", key)
        (out / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return {f: str(out / f) for f in FILES}
