"""The gsm kiosk's pairing codes (issue 39, service/bindings/gsm_pairing.py): single use, expiry, the per-address limit
on wrong codes, malformed codes, Crockford's look-alikes; over HTTP: issuing needs the kiosk token."""
from __future__ import annotations

import pytest

from privface.service.bindings.gsm_pairing import ALPHABET, CODE_CHARS, Pairing, PairingError


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_code_is_single_use_and_expires():
    clock = Clock()
    p = Pairing(ttl=120, clock=clock)
    code, ttl = p.new()
    assert ttl == 120 and len(code) == CODE_CHARS and set(code) <= set(ALPHABET)
    p.claim(f"{code[:4].lower()}-{code[4:]}", "a")  # as typed: lower case, a dash
    with pytest.raises(PairingError, match="already used") as e:
        p.claim(code, "a")
    assert e.value.status == 404
    code, _ = p.new()
    clock.t += 120.5
    with pytest.raises(PairingError, match="expired"):
        p.claim(code, "a")


def test_look_alikes_read_as_digits():
    p = Pairing()
    code, _ = p.new()
    typed = code.replace("0", "O").replace("1", "I")
    p.claim(typed, "a")


def test_wrong_codes_are_rate_limited_per_address():
    clock = Clock()
    p = Pairing(max_failures=3, window=60, clock=clock)
    code, _ = p.new()
    for _ in range(3):
        with pytest.raises(PairingError) as e:
            p.claim("ZZZZZZZZ" if code != "ZZZZZZZZ" else "YYYYYYYY", "guesser")
        assert e.value.status == 404
    with pytest.raises(PairingError, match="too many") as e:
        p.claim(code, "guesser")  # even the right code, until the window moves on
    assert e.value.status == 429 and e.value.retry_after and e.value.retry_after <= 61
    p.claim(code, "someone-else")  # other addresses are not affected
    clock.t += 61
    code, _ = p.new()
    p.claim(code, "guesser")


@pytest.mark.parametrize("bad", [None, 12345678, "", "ABC", "ABCDEFGHJ", "ABCD-EFG!", "ÄBCDEFGH", "UUUUUUUU"])
def test_malformed_codes_are_400_and_count(bad):
    p = Pairing(max_failures=1)
    with pytest.raises(PairingError) as e:
        p.claim(bad, "a")
    assert e.value.status == 400
    with pytest.raises(PairingError) as e:
        p.claim(p.new()[0], "a")
    assert e.value.status == 429


def test_kiosk_pairing_over_http(tmp_path):
    import httpx

    from privface.protocols.gsm import GsmParams
    from privface.service.app import create_app
    from privface.service.bindings.gsm import GsmService
    from privface.service.bindings.gsm_kiosk import Kiosk
    from privface.service.launch import serve_in_thread
    from privface.store import open_store

    kiosk = Kiosk(lambda frame: None)
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        svc = GsmService(store, role="terminal", params=GsmParams.toy(ell=16, m=8), provider_key=bytes(32),
                         kiosk=kiosk)
        with serve_in_thread(create_app(store, [svc])) as url:
            assert httpx.post(f"{url}/app/kiosk/pair", headers={"x-kiosk-token": "wrong"}).status_code == 403
            r = httpx.post(f"{url}/app/kiosk/pair", headers={"x-kiosk-token": kiosk.token}).json()
            assert r["url"].rstrip("/") == url and r["ttl"] > 0
            ok = httpx.post(f"{url}/app/pair", json={"code": r["code"]})
            assert ok.status_code == 200 and ok.json()["terminal"].rstrip("/") == url
            again = httpx.post(f"{url}/app/pair", json={"code": r["code"]})
            assert again.status_code == 404 and again.json()["type"] == "PairingError"
            assert httpx.post(f"{url}/app/pair", content=b"not json").status_code == 400
            # no --allow-origin: no CORS headers for anyone
            pre = httpx.options(f"{url}/app/pair", headers={"origin": "http://127.0.0.1:1",
                                                            "access-control-request-method": "POST"})
            assert "access-control-allow-origin" not in pre.headers
