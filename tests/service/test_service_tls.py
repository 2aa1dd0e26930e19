"""TLS and mutual TLS (issue 8): `privface certs` makes a dev CA, a real uvicorn serves https on loopback,
an im2020 flow succeeds with the CA and fails without it; with a client CA, a client without a
certificate is refused."""
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
from cryptography import x509

from privface.cli import main
from privface.protocols.im2020 import Client, Im2020Params
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.im2020 import Im2020Service
from privface.service.certs import make_dev_certs
from privface.service.client import ServiceClient, ServiceError, tls_context
from privface.service.clients import im2020 as remote
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore

TOY = Im2020Params.toy()
TEMPLATE = np.arange(128) % 7


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_dev_certs(tmp_path_factory.mktemp("certs"), ["localhost", "127.0.0.1"])


def test_dev_certs_are_private_p256_with_sans(certs, tmp_path, capsys):
    for name in ("ca.key", "server.key", "client.key"):
        assert stat.S_IMODE(os.stat(certs[name]).st_mode) == 0o600
    server = x509.load_pem_x509_certificate(open(certs["server.pem"], "rb").read())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert server.public_key().curve.name == "secp256r1"
    # the CLI writes the same set, and refuses to overwrite it
    assert main(["certs", "--out", str(tmp_path / "c"), "--hosts", "example.test", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == set(certs)
    assert main(["certs", "--out", str(tmp_path / "c")]) == 2 and "already holds" in capsys.readouterr().err


def _server(store, keys=None):
    return create_app(store, [Im2020Service(store, params=TOY)], keys=keys)


def test_verify_over_tls_needs_the_ca(certs, tmp_path):
    with SQLiteStore(tmp_path / "s.db") as store:
        keys = ApiKeys(store)
        api_key = keys.create("enrol,verify")[1]
        tls = {"ssl_certfile": certs["server.pem"], "ssl_keyfile": certs["server.key"]}
        with serve_in_thread(_server(store, keys), **tls) as url:
            assert url.startswith("https://127.0.0.1:")
            client = Client("grace", TOY)
            with remote.service_client(url, api_key=api_key, tls=tls_context(certs["ca.pem"])) as http:
                remote.enrol(http, client, TEMPLATE)
                assert remote.verify(http, client, TEMPLATE)["accepted"] is True
            with remote.service_client(url, api_key=api_key) as http, pytest.raises(ServiceError) as e:
                remote.verify(http, client, TEMPLATE)  # the system trust store does not know the dev CA
            assert e.value.status == 0 and "CERTIFICATE_VERIFY_FAILED" in str(e.value)
            with pytest.raises(ServiceError, match="plain http"):
                ServiceClient(url.replace("https", "http"), "im2020", tls=tls_context(certs["ca.pem"]))


def test_mutual_tls_refuses_a_client_without_certificate(certs, tmp_path):
    with SQLiteStore(tmp_path / "s.db") as store:
        tls = {"ssl_certfile": certs["server.pem"], "ssl_keyfile": certs["server.key"],
               "ssl_ca_certs": certs["ca.pem"], "ssl_cert_reqs": ssl.CERT_REQUIRED}
        with serve_in_thread(_server(store), **tls) as url:
            client = Client("grace", TOY)
            with remote.service_client(url, tls=tls_context(certs["ca.pem"])) as http, \
                    pytest.raises(ServiceError) as e:
                remote.enrol(http, client, TEMPLATE)
            assert e.value.status == 0 and store.get("im2020", "grace") is None
            with remote.service_client(url, tls=tls_context(certs["ca.pem"], certs["client.pem"],
                                                            certs["client.key"])) as http:
                remote.enrol(http, client, TEMPLATE)
                assert remote.verify(http, client, TEMPLATE)["accepted"] is True
    with pytest.raises(ServiceError, match="both"):
        tls_context(certs["ca.pem"], certs["client.pem"])


def test_cli_serve_tls_mtls_and_keys(certs, tmp_path):
    """privface serve --tls-cert/--tls-key/--tls-client-ca with keys; the CLI client flags reach it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    with SQLiteStore(tmp_path / "serve.db") as store:
        admin = ApiKeys(store).create("admin", name="ops")[1]
    env = {k: v for k, v in os.environ.items() if k != "PRIVFACE_API_KEY"}
    proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "serve", "--protocol", "im2020", "--db", db,
                             "--port", str(port), "--insecure-test-params", "--log-level", "warning",
                             "--tls-cert", certs["server.pem"], "--tls-key", certs["server.key"],
                             "--tls-client-ca", certs["ca.pem"]], env=env, stderr=subprocess.PIPE, text=True)
    server = f"https://localhost:{port}"
    mtls = ["--ca", certs["ca.pem"], "--client-cert", certs["client.pem"], "--client-key", certs["client.key"]]

    def revoke(*extra, key=admin):
        return subprocess.run([sys.executable, "-m", "privface.cli", "revoke", "--server", server, "--id", "nobody",
                               "--admin", *extra],
                              env={**env, **({"PRIVFACE_API_KEY": key} if key else {})},
                              capture_output=True, text=True, timeout=60)
    try:
        deadline = time.monotonic() + 60
        while (r := revoke(*mtls)).returncode == 2 and "cannot reach" in r.stderr:
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        assert r.returncode == 2 and "not enrolled" in r.stderr, r.stderr  # TLS, mTLS and the key all passed
        assert "API key" in revoke(*mtls, key=None).stderr
        no_cert = revoke("--ca", certs["ca.pem"])
        assert no_cert.returncode == 2 and "not enrolled" not in no_cert.stderr
        assert "CERTIFICATE_VERIFY_FAILED" in revoke().stderr
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert f"https://127.0.0.1:{port}" in err and "mutual TLS" in err and admin.split("_", 2)[2] not in err
