"""kolberg (seed 002): Client / DBServer / AuthServer at the real 128-bit parameters, in process."""
import numpy as np
import pytest

from privface import demo_data
from privface.crypto import lattice, ntru
from privface.errors import PrivfaceError, ProtocolError, UnknownSubjectError
from privface.protocols import catalogue
from privface.protocols.kolberg import (
    AuthServer,
    Client,
    DBServer,
    DistanceBatch,
    EnrolRequest,
    KolbergParams,
    VerifyRequest,
    plaintext_distance,
    protect,
)
from privface.protocols.kolberg.messages import StoredReference
from privface.protocols.kolberg.parties import PROTOCOL
from privface.store.sqlite import SQLiteStore

SCHEMES = ("ckks", "bfv", "ntru")
rng = np.random.default_rng(2024)
GALLERY = rng.normal(0.0, 0.12, (6, 128))


class Deployment:
    def __init__(self, scheme, **kw):
        self.params = KolbergParams(scheme, **{"backend": "dlib-resnet128", **kw})  # dlib-like GALLERY, τ
        self.auth = AuthServer(self.params)
        pk = self.auth.public_key().to_bytes()
        self.calls = []
        self.store = SQLiteStore(None)
        self.db = DBServer(self.params, self.store, pk, self._auth)
        self.client = Client(self.params, pk)

    def _auth(self, body):
        self.calls.append(body)
        return self.auth.decide(body)

    def plain(self, a, b):
        return plaintext_distance(self.params, protect(self.params, a), protect(self.params, b))


@pytest.fixture(scope="module", params=SCHEMES)
def dep(request):
    d = Deployment(request.param)
    for k, x in enumerate(GALLERY):
        d.db.enrol(d.client.enrol(f"s{k}", x).to_bytes())
    return d


def _far_from_threshold(dep, dist):
    """CKKS: the flooded distance may differ by σ ≈ 0.001; keep test pairs > 20σ from τ."""
    return dep.params.scheme != "ckks" or abs(dist - dep.params.tau) > 20 * lattice.flood_sigma()


def _probes():
    out = []
    for k in range(len(GALLERY)):
        for noise in (0.01, 0.04, 0.07):
            out.append((k, GALLERY[k] + rng.normal(0.0, noise, 128)))
    out.append((None, rng.normal(0.0, 0.12, 128)))
    return out


PROBES = _probes()


def test_verification_decisions_equal_plaintext_decisions(dep):
    checked = accepted = 0
    for k, probe in PROBES:
        for claimed in (k or 0, ((k or 0) + 1) % len(GALLERY)):
            d = dep.plain(GALLERY[claimed], probe)
            if not _far_from_threshold(dep, d):
                continue
            r = dep.db.verify(dep.client.verify(f"s{claimed}", probe).to_bytes())
            assert r.accepted == (d <= dep.params.tau) and r.subject_id is None
            checked += 1
            accepted += r.accepted
    assert checked >= 20 and 0 < accepted < checked  # both outcomes exercised


def test_identification_rank1_equals_plaintext(dep):
    checked = 0
    for _k, probe in PROBES:
        dists = [dep.plain(g, probe) for g in GALLERY]
        best = int(np.argmin(dists))
        if not _far_from_threshold(dep, dists[best]) or sorted(dists)[1] - dists[best] < 0.01:
            continue
        r = dep.db.identify(dep.client.identify(probe).to_bytes())
        want = f"s{best}" if dists[best] <= dep.params.tau else None
        assert (r.accepted, r.subject_id) == (want is not None, want)
        checked += 1
    assert checked >= 10


def test_identification_chunks_a_large_gallery_and_hides_ids_from_the_auth_server():
    d = Deployment("ntru")
    X = rng.normal(0.0, 0.12, (40, 128))
    for k, x in enumerate(X):
        d.db.enrol(d.client.enrol(f"id{k}", x))
    r = d.db.identify(d.client.identify(X[33] + rng.normal(0, 0.01, 128)))
    assert r.subject_id == "id33"
    batches = [DistanceBatch.from_bytes(b) for b in d.calls]
    assert [b.offset for b in batches] == [0, 16, 32] and [b.last for b in batches] == [False, False, True]
    assert len({b.request_id for b in batches}) == 1
    assert not any(b"id33" in body for body in d.calls)  # no subject id reaches the auth server
    d.calls.clear()
    d.db.identify(d.client.identify(X[33]))
    assert DistanceBatch.from_bytes(d.calls[0]).request_id != batches[0].request_id  # fresh per request


@pytest.fixture(scope="module")
def real(backend):
    """dlib embeddings: the enrolled photo, two altered copies (genuine), two impostors."""
    ref = backend.embed(demo_data.enrolled_photo())
    probes = list(demo_data.altered_copies(demo_data.enrolled_photo()).values())[:2]
    probes += list(demo_data.impostor_photos().values())
    return ref, [backend.embed(img) for img in probes]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_real_embeddings_decide_as_in_plaintext(scheme, real):
    d = Deployment(scheme)
    ref, probes = real
    d.db.enrol(d.client.enrol("grace", ref))
    decisions = []
    for x in probes:
        dist = d.plain(ref, x)
        assert _far_from_threshold(d, dist)
        decisions.append(d.db.verify(d.client.verify("grace", x)).accepted)
        assert decisions[-1] == (dist <= d.params.tau)
    assert decisions == [True, True, False, False]


def test_db_server_compromise_sees_only_ciphertexts(dep):
    secret_types = (lattice.LatticeSecretContext, ntru.NTRUPrivateKey)
    assert not any(isinstance(v, secret_types) for v in vars(dep.db).values())
    assert not any(isinstance(v, secret_types) for pub in dep.db._keys.values() for v in vars(pub).values())
    stored = StoredReference.from_bytes(dep.store.get(PROTOCOL, "s0"))
    assert stored.versions == [1]
    record = EnrolRequest("s0", stored.backend, stored.templates[0])
    template = protect(dep.params, GALLERY[0])
    raw = {"ckks": template.astype("<f8").tobytes(), "bfv": template.astype("<i8").tobytes(),
           "ntru": template.astype(np.uint8).tobytes()}[dep.params.scheme]
    assert raw[:16] not in record.template and raw[-16:] not in record.template
    # an attacker's own key pair cannot use the stored references
    other = AuthServer(dep.params)
    with pytest.raises(ProtocolError, match="another public key"):
        db = DBServer(dep.params, SQLiteStore(None), other.public_key(), other.decide)
        db._keys[1].load(record.template, "template")


def _state(dep):
    return {s: dep.store.get(PROTOCOL, s) for s in dep.store.ids(PROTOCOL)}, dict(dep.auth._pending)


def test_malformed_messages_are_rejected_without_state_change(dep):
    before = _state(dep)
    good = dep.client.enrol("s0", GALLERY[0]).to_bytes()
    other_key = Client(dep.params, AuthServer(dep.params).public_key())
    bad = [
        (good[:-7], "malformed"),
        (EnrolRequest("s0", dep.params.backend, b"junk").to_bytes(), "rejected"),
        (other_key.enrol("s0", GALLERY[0]).to_bytes(), "another public key"),
        (VerifyRequest("s0", dep.params.backend, b"x").to_bytes(), "malformed"),  # wrong message type
    ]
    if dep.params.scheme != "ntru":
        probe = dep.client.verify("s0", GALLERY[0]).probe
        bad.append((EnrolRequest("s0", dep.params.backend, probe).to_bytes(), "expected a template"))
    for body, match in bad:
        with pytest.raises(ProtocolError, match=match):
            dep.db.enrol(body)
    short = Client(KolbergParams(dep.params.scheme, dims=64, backend=dep.params.backend), dep.auth.public_key())
    with pytest.raises(ProtocolError, match="dimension|bits"):
        dep.db.enrol(short.enrol("s0", GALLERY[0][:64]))
    with pytest.raises(UnknownSubjectError):
        dep.db.verify(dep.client.verify("nobody", GALLERY[0]))
    with pytest.raises(ProtocolError):
        dep.client.enrol("s0", np.full(128, np.nan))
    with pytest.raises(ProtocolError):
        dep.client.enrol("bad id!", GALLERY[0])
    assert _state(dep) == before


def test_auth_server_rejects_bad_batches_without_state_change(dep):
    probe = dep.client.verify("s1", GALLERY[1]).probe
    pub = dep.db._keys[1]
    d = pub.distance(dep.db._reference("s1", 1), pub.load(probe, "probe")).to_bytes()
    before = dict(dep.auth._pending)
    for batch, match in [
        (DistanceBatch(b"r" * 15, 0, [d], True), "16 bytes"),
        (DistanceBatch(b"r" * 16, 0, [], True), "at least one"),
        (DistanceBatch(b"r" * 16, 3, [d], True), "offset"),
        (DistanceBatch(b"r" * 16, 0, [d, b"junk"], True), "rejected"),
    ]:
        with pytest.raises(ProtocolError, match=match):
            dep.auth.decide(batch.to_bytes())
    if dep.params.scheme != "ntru":
        with pytest.raises(ProtocolError, match="expected a distance"):
            dep.auth.decide(DistanceBatch(b"r" * 16, 0, [probe], True))
    assert dep.auth._pending == before
    from privface.protocols.kolberg import parties
    full = dict.fromkeys((k.to_bytes(16, "big") for k in range(parties.MAX_PENDING)), (1, 0.0, 0, dep.auth._clock()))
    dep.auth._pending.update(full)
    with pytest.raises(ProtocolError, match="too many open"):
        dep.auth.decide(DistanceBatch(b"n" * 16, 0, [d], False))
    for k in full:
        del dep.auth._pending[k]
    ok = dep.auth.decide(DistanceBatch(b"q" * 16, 0, [d], True))
    assert ok.best == 0 and ok.accepted is True


def test_public_key_for_another_scheme_is_refused():
    ckks = AuthServer(KolbergParams("ckks"))
    with pytest.raises(ProtocolError, match="ckks"):
        Client(KolbergParams("bfv"), ckks.public_key())
    from privface.protocols.kolberg import PublicKey
    with pytest.raises(ProtocolError, match="expected bfv"):
        Client(KolbergParams("bfv"), PublicKey("bfv", ckks.public_key().key))
    with pytest.raises(PrivfaceError):
        Client(KolbergParams("ntru"), PublicKey("ntru", b"PFNK\x01junk"))


def test_catalogue_lists_kolberg():
    entry = next(e for e in catalogue() if e["name"] == "kolberg")
    assert [lvl["scheme"] for lvl in entry["security_levels"] if lvl["security_bits"] >= 128] == list(SCHEMES)
    assert "which client asked" in entry["leakage"]["not_leaked_to_auth_server"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_eval_plugin_counts_no_mismatches(scheme):
    from privface.eval import metrics
    from privface.eval.kolberg_eval import protocol_scores

    centres = rng.normal(0.0, 0.12, (3, 128))
    vectors = np.repeat(centres, 3, axis=0) + rng.normal(0.0, 0.04, (9, 128))
    ids = np.repeat(np.arange(3), 3)
    found = np.ones(9, dtype=bool)
    found[5] = False
    i, j, genuine = metrics.all_pairs(ids)
    dq, extra = protocol_scores(vectors, found, ids, i, j, genuine, 1e9, params=KolbergParams(scheme))
    ok = found[i] & found[j]
    assert extra["pairs_run"] == ok.sum() == 28 and (dq[~ok] == 1e9).all()
    assert extra["mismatches"] == 0 and extra["rank1_mismatches"] == 0
    assert extra["identification_probes"] == 5 and extra["gallery_size"] == 3
    assert extra["rank1_encrypted"] == pytest.approx(extra["rank1_plaintext_templates"]) == 1.0
    _, sampled = protocol_scores(vectors, found, ids, i[:3], j[:3], genuine[:3], 1e9, params=KolbergParams(scheme),
                                 identification_probes=2)
    assert sampled["identification_probes"] == 2 and sampled["pairs_run"] == 3
