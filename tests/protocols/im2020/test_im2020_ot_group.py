"""im2020 secure comparison: its OT runs on edwards25519 (``parties.OT_GROUP``); the server refuses an OT
request in any other group (a client built for the former MODP-2048 OT gets a ProtocolError, nothing else)."""
import numpy as np
import pytest

from privface.crypto.compare import Evaluator
from privface.crypto.ot import ED25519, MODP_2048, OTRequest
from privface.errors import ProtocolError
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import Client, CompareRequest, Im2020Params, Server
from privface.protocols.im2020.parties import OT_GROUP
from privface.store import open_store

SECURE = Im2020Params.toy(mode="secure-comparison")


@pytest.fixture
def parties(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'im2020.db'}") as store:
        client, server = Client("alice", SECURE, workers=1), Server(store, SECURE)
        template = attacks.face_like_template(SECURE, np.random.default_rng(1))
        server.enrol(client.enrol(template))
        yield client, server, template


def test_the_comparison_ot_is_on_edwards25519(parties):
    client, server, template = parties
    assert OT_GROUP is ED25519
    challenge, _ = server.auth_start(client.auth_start(template))
    request, _ = client.compare_request(challenge)
    assert OTRequest.from_bytes(request.ot_request).group is ED25519


def test_a_modp_ot_request_is_refused(parties):
    client, server, template = parties
    challenge, session = server.auth_start(client.auth_start(template))
    s_star = client.blinded_score(challenge)
    modp = Evaluator.im2020(challenge.compare_bits, s_star % (1 << challenge.compare_bits), group=MODP_2048)
    with pytest.raises(ProtocolError, match="OT request"):
        server.auth_compare(session, CompareRequest(modp.request().to_bytes()))
