"""gsm over real loopback HTTP: a device enrols with a provider server (Π_en with its proofs) and runs Π1, Π2
and Π3 against a terminal server; decisions equal the plaintext cosine decisions; bad steps get typed errors.
Toy 1024-bit keys."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privface.protocols.gsm import (
    Challenge,
    Decision,
    Device,
    EnrolRequest,
    GsmParams,
    MatchStart,
    ProviderKey,
    Reply,
    Template,
)
from privface.service.app import create_app
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.client import RemoteMessageError, RemoteSessionError, ServiceClient
from privface.service.clients.gsm import DeviceClient, fetch_provider_key
from privface.service.launch import serve_in_thread
from privface.store import open_store
from privface.templates.fixed_norm import fixed_norm_template

P = GsmParams.toy(ell=16, m=8, cos_threshold=0.6)


def template(seed: int, base=None, noise: float = 0.0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=P.ell)
    return fixed_norm_template(x if base is None else base + x * noise * P.zeta, P.m)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """A provider and a terminal server (separate stores), the terminal capturing ``capture[0]``."""
    root = tmp_path_factory.mktemp("gsm")
    capture = [None]
    with open_store(f"sqlite:///{root / 'sp.db'}") as sp_store, open_store(f"sqlite:///{root / 't.db'}") as t_store:
        provider = GsmService(sp_store, role="provider", params=P)
        with serve_in_thread(create_app(sp_store, [provider])) as sp_url:
            vk = provider_key_bytes(fetch_provider_key(sp_url))
            terminal = GsmService(t_store, role="terminal", params=P, provider_key=vk, capture=lambda: capture[0],
                                  allow_pi1=True)
            with serve_in_thread(create_app(t_store, [terminal])) as t_url:
                yield sp_url, t_url, capture, provider, sp_store


@pytest.fixture(scope="module")
def enrolled(servers):
    sp_url, _, _, provider, store = servers
    dev = Device("hana", P, provider_key=fetch_provider_key(sp_url))
    client = DeviceClient(dev)
    u = template(1)
    m1 = client.enrol(sp_url, u)
    assert [s.step for s in client.stats] == ["enrol/start", "enrol/finish"]
    assert Template.from_bytes(store.get("gsm", "hana")) == m1  # the provider keeps the signed m1
    return client, u


@pytest.mark.parametrize("variant", ["pi1", "pi2", "pi3"])
def test_all_variants_over_http_equal_plaintext_decisions(servers, enrolled, variant):
    _, t_url, capture, _, _ = servers
    client, u = enrolled
    for w in (template(2, u, 0.1), template(3)):
        capture[0] = w
        d = client.match(t_url, variant)
        assert d == Decision(int(u @ w) >= P.threshold)
    assert [s.step for s in client.stats][-1] == "match/finish"
    assert ("match/compare" in [s.step for s in client.stats]) == (variant == "pi3")


def test_provider_key_is_stable_across_restarts(servers, tmp_path):
    """With a key file, the provider keeps its generated signing key there (not in the store) across restarts."""
    _, _, _, _, store = servers
    path = tmp_path / "sp.key"
    first = GsmService(store, role="provider", params=P, signing_key_path=path)
    again = GsmService(store, role="provider", params=P, signing_key_path=path)
    assert provider_key_bytes(again.provider.public_key) == provider_key_bytes(first.provider.public_key)


def test_bad_enrolment_and_match_steps_get_typed_errors(servers, enrolled):
    sp_url, t_url, capture, _, _ = servers
    client, u = enrolled
    dev = client.device
    with ServiceClient(sp_url, "gsm") as http:
        unproven = dev.unproven_enrol_request(u)
        with pytest.raises(RemoteMessageError, match="zero-knowledge"):
            http.step("enrol/start", unproven.to_bytes())
        with pytest.raises(RemoteSessionError):
            http.step("enrol/finish", b"")
        with pytest.raises(RemoteMessageError):
            http.step("enrol/start", b"not a message")
        http.step("enrol/start", dev.enrol_start(u).to_bytes())
        with pytest.raises(RemoteMessageError):  # a garbage answer ends this enrolment
            http.step("enrol/finish", ProviderKey(b"").to_bytes())
        with pytest.raises(RemoteMessageError):
            http.step("key", EnrolRequest("x", 1, 3, []).to_bytes())
    capture[0] = u
    with ServiceClient(t_url, "gsm") as http:
        m1 = dev.first_message()
        with pytest.raises(RemoteMessageError, match="variant"):
            http.step("match/start", MatchStart(9, m1.to_bytes()).to_bytes())
        forged = dataclasses.replace(m1, signature=bytes(64))
        with pytest.raises(RemoteMessageError, match="signature"):
            http.step("match/start", MatchStart(2, forged.to_bytes()).to_bytes())
        http.step("match/start", MatchStart(2, m1.to_bytes()).to_bytes())
        with pytest.raises(RemoteSessionError):  # Π2 has no compare step
            http.step("match/compare", b"")
        http.reset()
        ch = http.step("match/start", MatchStart(2, m1.to_bytes()).to_bytes())
        reply = dev.pi2_reply(Challenge.from_bytes(ch))
        x = reply.x
        forged = Reply(reply.x_bytes, x + 1).to_bytes()
        assert Decision.from_bytes(http.step("match/finish", forged)).aborted  # forged X: ⊥
        with pytest.raises(RemoteSessionError):  # the session is over
            http.step("match/finish", reply.to_bytes())
    assert client.match(t_url, "pi2").match  # the servers still work for honest parties


def test_privface_serve_gsm_provider_enrols_a_device(tmp_path, capsys):
    """`privface serve --protocol gsm --role provider` in a child process; a terminal without --provider-key is
    refused."""
    from privface.cli import main
    from privface.service.launch import serve_subprocess

    toy = GsmParams.toy()  # what --insecure-test-params serves: ℓ = 128, m = 16, 1024-bit keys
    db = f"sqlite:///{tmp_path / 'sp.db'}"
    with serve_subprocess("gsm", db, ["--role", "provider", "--insecure-test-params"]) as url:
        dev = Device("ines", toy, provider_key=fetch_provider_key(url))
        u = fixed_norm_template(np.random.default_rng(5).normal(size=toy.ell), toy.m)
        assert DeviceClient(dev).enrol(url, u).subject_id == "ines"
    assert main(["serve", "--protocol", "gsm", "--role", "terminal", "--db", db, "--insecure-test-params"]) != 0
    assert "needs --provider-key" in capsys.readouterr().err
    assert main(["serve", "--protocol", "gsm", "--db", db]) != 0
    assert "--role provider or --role terminal" in capsys.readouterr().err


def test_terminal_keeps_presented_first_messages(tmp_path, enrolled):
    """match/present validates m1 ahead of the capture; the terminal keeps it with its r^N and reuse tables,
    re-checks expiry on every use, refuses a forged m1 without keeping it, and holds at most ``m1_cache``."""
    from privface.protocols.gsm import Presented

    client, u = enrolled
    dev = client.device
    capture = [u]
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        vk = provider_key_bytes(dev.provider_key)
        terminal = GsmService(store, role="terminal", params=P, provider_key=vk, capture=lambda: capture[0], m1_cache=2,
                              allow_pi1=True)
        cache = terminal.m1_cache
        with serve_in_thread(create_app(store, [terminal])) as t_url:
            answer = client.present(t_url, "pi2")
            assert isinstance(answer, Presented) and answer.subject_id == "hana"
            assert answer.expires_at == dev.first_message().expires_at
            cache.wait()
            (enrolled_m1, _), = cache._entries.values()
            assert enrolled_m1.per_slot and len(enrolled_m1.pool) == cache.pool_ahead  # reuse tables and r^N ready
            for variant in ("pi2", "pi3", "pi1"):
                for w in (template(2, u, 0.1), template(3)):
                    capture[0] = w
                    assert client.match(t_url, variant) == Decision(int(u @ w) >= P.threshold)
            assert len(cache) == 2  # bounded: three variants seen, the least recently used one dropped
            m1 = dev.first_message()
            forged = dataclasses.replace(m1, signature=bytes(64))
            before = list(cache._entries)
            with ServiceClient(t_url, "gsm") as http:
                with pytest.raises(RemoteMessageError, match="signature"):
                    http.step("match/present", MatchStart(2, forged.to_bytes()).to_bytes())
            assert list(cache._entries) == before
            client.present(t_url, "pi2")
            terminal.terminal.clock = lambda: m1.expires_at + 1  # the kept m1 expires
            with pytest.raises(RemoteMessageError, match="expired"):
                client.match(t_url, "pi2")
            with pytest.raises(RemoteMessageError, match="expired"):
                client.present(t_url, "pi2")
            with pytest.raises(RemoteMessageError, match="expired"):  # a signed m1 expires for Π1 too
                client.match(t_url, "pi1")
