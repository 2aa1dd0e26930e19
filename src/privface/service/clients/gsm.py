"""gsm over HTTP, device side: the ``Device`` party driven through ``ServiceClient`` against a provider
(Π_en, §6/§8) and a terminal (Π1 §5, Π2 §6, Π3 §7) run by ``privface serve --protocol gsm --role …``.

Every answer is parsed and validated by the wire codec and the party before use; the provider's first
message is checked against the verification key the device holds (σ, subject, key) before it is kept.
"""
from __future__ import annotations

import dataclasses

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ...crypto.paillier import PaillierPrivateKey
from ...errors import CryptoError, ProtocolError
from ...faces.registry import LEGACY_BACKEND
from ...protocols.gsm import zk
from ...protocols.gsm.keyfile import provider_key_bytes, provider_key_from_bytes
from ...protocols.gsm.messages import (
    VARIANT_IDS,
    Challenge,
    Claim,
    CompareChallenge,
    Decision,
    DeviceKey,
    LegacyDeviceKey,
    MatchStart,
    Presented,
    ProviderKey,
    Template,
    read_template,
)
from ...protocols.gsm.params import GsmParams, check_variant
from ...protocols.gsm.parties import PROTOCOL, Device
from ...wire import WireError, message_type
from ..client import ServiceClient


def _parse(fn, *args):
    try:
        return fn(*args)
    except (WireError, CryptoError) as e:
        raise ProtocolError(f"malformed answer from the service: {e}") from None


def fetch_provider_key(provider_url: str, *, timeout: float = 60.0, transport=None, api_key: str | None = None,
                       tls=None) -> Ed25519PublicKey:
    """The provider's Ed25519 verification key (trust on first use: pin it out of band in production)."""
    with ServiceClient(provider_url, PROTOCOL, timeout=timeout, transport=transport, api_key=api_key,
                       tls=tls) as http:
        answer = _parse(ProviderKey.from_bytes, http.step("key", ProviderKey(b"").to_bytes()))
    return provider_key_from_bytes(answer.ed25519)


class DeviceClient:
    """A ``Device`` talking HTTP: ``enrol(provider_url, u)`` then ``match(terminal_url, variant)`` any number
    of times with the same reusable m1. ``stats`` (per call) holds the ServiceClient step statistics.
    ``api_key`` / ``tls``: see ServiceClient (the same key for provider and terminal: scopes enrol, verify)."""

    def __init__(self, device: Device, *, timeout: float = 60.0, transport=None, api_key: str | None = None,
                 tls=None) -> None:
        self.device = device
        self._timeout, self._transport = timeout, transport
        self._api_key, self._tls = api_key, tls
        self.stats: list = []

    def _client(self, url: str) -> ServiceClient:
        return ServiceClient(url, PROTOCOL, timeout=self._timeout, transport=self._transport,
                             api_key=self._api_key, tls=self._tls)

    def enrol(self, provider_url: str, u, *, workers: int | None = 1) -> Template:
        """Π_en: enrol/start (epk, ⟦u_i⟧, Π_epk, Fig. 9) → Fig. 10 challenge; enrol/finish → signed m1."""
        dev = self.device
        request = dev.enrol_start(u, workers=workers)
        with self._client(provider_url) as http:
            challenge = _parse(zk.NormChallenge.from_bytes, http.step("enrol/start", request.to_bytes()),
                               dev.pk, dev.params.ell)
            answer = dev.enrol_respond(challenge, workers=workers)
            m1 = _parse(Template.from_bytes, http.step("enrol/finish", answer.to_bytes()))
            self.stats = list(http.stats)
        dev.accept_enrolment(m1)
        return m1

    def present(self, terminal_url: str, variant: str) -> Presented:
        """Send the reusable m1 ahead of any capture (§5), so that the terminal validates it and precomputes
        for it before the user reaches the camera; a later ``match`` with it is faster."""
        dev, variant = self.device, check_variant(variant)
        start = MatchStart(VARIANT_IDS[variant], dev.first_message().to_bytes())
        with self._client(terminal_url) as http:
            answer = _parse(Presented.from_bytes, http.step("match/present", start.to_bytes()))
            self.stats = list(http.stats)
        if answer.subject_id != dev.first_message().subject_id:
            raise ProtocolError("the terminal acknowledged a different subject")
        return answer

    def match(self, terminal_url: str, variant: str) -> Decision:
        """One matching session against the terminal's current capture; the result (``aborted`` = ⊥). Π1's result
        is the device's own decision (the terminal answers it back as a ``Claim``; it must allow Π1 by name)."""
        dev, variant = self.device, check_variant(variant)
        start = MatchStart(VARIANT_IDS[variant], dev.first_message().to_bytes())
        with self._client(terminal_url) as http:
            challenge = _parse(Challenge.from_bytes, http.step("match/start", start.to_bytes()))
            if variant == "pi1":  # the terminal echoes our bit as a Claim: it decides nothing in Π1
                decision = dev.pi1_decide(challenge)
                claim = _parse(Claim.from_bytes, http.step("match/finish", decision.to_bytes()))
                if claim.device_claims_match != decision.match:
                    raise ProtocolError("the terminal echoed a different Π1 claim")
            elif variant == "pi2":
                decision = _parse(Decision.from_bytes, http.step("match/finish", dev.pi2_reply(challenge).to_bytes()))
            else:
                request, evaluator = dev.pi3_request(challenge)
                garbled = _parse(CompareChallenge.from_bytes, http.step("match/compare", request.to_bytes()))
                finish = dev.pi3_finish(evaluator, garbled)
                decision = _parse(Decision.from_bytes, http.step("match/finish", finish.to_bytes()))
            self.stats = list(http.stats)
        return decision


def device_key_record(device: Device, provider_url: str) -> DeviceKey:
    """The device's key file record (wire ``gsm.DeviceKey``): esk = (p, q), subject, provider URL and key, and m1
    once enrolled — the format the browser page exports and imports."""
    if device.provider_key is None:
        raise ProtocolError("a device key file needs the provider's verification key")
    m1 = device.first_message().to_bytes() if device._m1 is not None else b""
    return DeviceKey(device.subject_id, provider_url, provider_key_bytes(device.provider_key), int(device._sk.p),
                     int(device._sk.q), m1, device.params.insecure_test_params, device.params.backend)


def read_device_key(data: bytes) -> DeviceKey:
    """A key file's record; one written before key files named their face backend (``gsm.LegacyDeviceKey``) reads
    as dlib-resnet128, the only backend there was."""
    if _parse(message_type, data) == LegacyDeviceKey.WIRE_NAME:
        old = _parse(LegacyDeviceKey.from_bytes, data)
        return DeviceKey(**dataclasses.asdict(old), backend=LEGACY_BACKEND)
    return _parse(DeviceKey.from_bytes, data)


def load_device(data: bytes, params: GsmParams, *, workers: int | None = None) -> tuple[Device, DeviceKey]:
    """A ``Device`` from key-file bytes: the primes are checked (distinct primes of the required size, a
    Paillier–Blum pair), the m1 it holds is checked against subject, key and the provider's signature."""
    record = read_device_key(data)
    if record.backend is not None and record.backend != params.backend:
        raise ProtocolError(f"this key file's template was enrolled with face backend {record.backend}; these "
                            f"parameters are for {params.backend}: a probe of one backend against a template of "
                            "another decides nothing (enrol again with this backend, or use the key file's)")
    if record.insecure_test_params and not params.insecure_test_params:
        raise ProtocolError("this key file holds insecure test parameters; it does not fit this server")
    try:
        sk = PaillierPrivateKey.from_primes(record.p, record.q, insecure_test_params=params.insecure_test_params)
    except CryptoError as e:
        raise ProtocolError(f"the key file's Paillier key is invalid: {e}") from None
    if record.p % 4 != 3 or record.q % 4 != 3:
        raise ProtocolError("the key file's Paillier key is not a Paillier–Blum key (p ≡ q ≡ 3 mod 4)")
    device = Device(record.subject_id, params, keypair=(sk.public_key, sk),
                    provider_key=provider_key_from_bytes(record.provider_key), workers=workers)
    if record.first_message:
        device.accept_enrolment(read_template(record.first_message))
    return device, record
