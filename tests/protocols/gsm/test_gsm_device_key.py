"""The gsm device's key file names the face backend of its template (issue 36): loading it with another backend's
parameters is a clear error; a file written before key files named it reads as dlib-resnet128."""
from __future__ import annotations

import dataclasses

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privface.errors import ProtocolError
from privface.protocols.gsm.messages import DeviceKey, LegacyDeviceKey
from privface.protocols.gsm.params import GsmParams
from privface.protocols.gsm.parties import Device
from privface.service.clients.gsm import device_key_record, load_device, read_device_key

SFACE = GsmParams.toy(ell=16, m=8)
DLIB = GsmParams.toy(ell=16, m=8, backend="dlib-resnet128")


@pytest.fixture(scope="module")
def device() -> Device:
    return Device("ada", SFACE, provider_key=Ed25519PrivateKey.generate().public_key())


def test_the_key_file_names_the_backend_and_another_backend_is_refused(device):
    record = device_key_record(device, "http://127.0.0.1:1/")
    assert record.backend == "sface" == SFACE.backend
    loaded, again = load_device(record.to_bytes(), SFACE)
    assert again == record and loaded.params.backend == "sface"
    with pytest.raises(ProtocolError, match="enrolled with face backend sface; these parameters are for "
                                            "dlib-resnet128"):
        load_device(record.to_bytes(), DLIB)


def test_a_key_file_from_before_backends_were_named_reads_as_dlib(device):
    record = device_key_record(device, "http://127.0.0.1:1/")
    fields = {k: v for k, v in dataclasses.asdict(record).items() if k != "backend"}
    old = LegacyDeviceKey(**fields).to_bytes()
    assert read_device_key(old) == dataclasses.replace(record, backend="dlib-resnet128")
    assert load_device(old, DLIB)[1].backend == "dlib-resnet128"
    with pytest.raises(ProtocolError, match="enrolled with face backend dlib-resnet128"):
        load_device(old, SFACE)


def test_a_key_file_that_does_not_name_its_backend_loads_with_any(device):
    """The page's key files name none until it writes the field: accepted, as before issue 36."""
    record = dataclasses.replace(device_key_record(device, "http://127.0.0.1:1/"), backend=None)
    assert DeviceKey.from_bytes(record.to_bytes()).backend is None
    assert load_device(record.to_bytes(), DLIB)[0].params.backend == "dlib-resnet128"


def test_gsm_params_follow_the_backend():
    assert SFACE.cos_threshold != DLIB.cos_threshold
    assert GsmParams.toy(backend="dlib-resnet128", cos_threshold=0.5).cos_threshold == 0.5
