"""Gallery schemes: one adapter per scheme, registered in ``GALLERY_SCHEMES`` (as ``service.registry`` does for roles).

A ``GalleryScheme`` is what a persisted gallery needs of its encryption scheme: its key records, the public and
secret schemes of the protocol (ENC_DB / IP_DB, and decryption), the dtype and shape of a stored block, and how
the IP_DB message travels in protocol ``ident``'s ``ScoreChunk`` (``scale.ident``). The
block galleries (``scale.gallery``: hers, seed 003 §3.2; idface-ckks and idface-paillier, seed 003 §4) share one
store layout and are driven entirely through these hooks. cryptomask (seed 001 Alg. 1–3) keeps its own layout
and 1-bit identification (``own_layout``): its adapter hands enrolment and identification to
``scale.cryptomask_gallery`` and ``scale.cryptomask_identify``.
"""
from __future__ import annotations

import numpy as np

from ..crypto.lattice import CKKS, LatticeParams, LatticePublicContext, LatticeSecretContext, generate_lattice_keypair
from ..errors import PrivfaceError
from ..protocols.hers import HERS, HERS_CKKS, HERSKey
from ..protocols.hers.scheme import CKKSScores, HERSBlock
from ..protocols.idface import IDFaceCKKS, IDFaceCKKSKey, IDFacePaillier, IDFacePaillierKey, PaillierScores
from ..protocols.idface.ckks import CKKSBlock
from . import cryptomask_gallery, cryptomask_identify
from . import paillier_blocks as pb
from .default_tau import idface_key
from .layout import GalleryError


def lattice_params(insecure_test_params: bool) -> LatticeParams:
    """The CKKS parameters of hers and idface-ckks galleries (a toy ring only behind the test flag)."""
    if insecure_test_params:
        return LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)
    return HERS_CKKS


class GalleryScheme:
    """One gallery scheme. ``settings`` is the gallery's ``scale.gallery.Settings`` (dim, β, μ, lift, test flag)."""

    name: str
    transform = False  # takes β, the centring μ and the lift (idface's pre-transform)
    erasable = False  # ``erase`` zeroes withdrawn slots in the ciphertexts (with S_key's refresh)
    erases_every_empty_slot = False  # ``erase`` zeroes all empty slots of a block (``erase_withdrawn`` can use it)
    reencrypt_erasure = False  # erases over S_key's ``reencrypt`` step (``scale.ident.KeyLink``, HTTP)
    own_layout = False  # keeps its own store layout, enrolment and identification (not scale.gallery's blocks)

    def tau_key(self, settings, centring: str) -> str:
        """This setting's key in the shipped default-τ table (``scale.default_tau``)."""
        return self.name

    def generate_keypair(self, settings) -> tuple[object, object, bytes, bytes]:
        """(pub, sec, pk record, sk record) of a fresh key pair."""
        pub, sec = generate_lattice_keypair(lattice_params(settings.insecure_test_params),
                                         insecure_test_params=settings.insecure_test_params)
        return pub, sec, pub.to_bytes(), sec.secret_to_bytes()

    def load_public(self, settings, raw: bytes):
        """The public key / context from its record (CryptoError if damaged)."""
        return LatticePublicContext.from_bytes(raw, insecure_test_params=settings.insecure_test_params)

    def load_secret(self, settings, pub, raw: bytes):
        return LatticeSecretContext.from_bytes(pub, raw)

    def public_scheme(self, settings, pub):
        raise NotImplementedError

    def secret_scheme(self, settings, sec):
        raise NotImplementedError

    def public_meta(self, pub) -> dict:
        """Meta entries checked against the ``pk`` record on load (none but for idface-paillier)."""
        return {}

    def block_layout(self, settings, pub) -> tuple[str, tuple[int, ...]]:
        """The dtype and shape every stored block array of this scheme has."""
        raise NotImplementedError

    def block_to_array(self, block, pub) -> np.ndarray:
        return block.data

    def block_from_array(self, arr: np.ndarray, count: int, pub, what: str):
        """A stored block array back as the scheme's block (checked where the scheme can check it)."""
        raise NotImplementedError

    def max_sums(self, settings) -> int:
        """How many encryptions a stored block's ciphertexts may be the sum of (``scale.lifecycle.add`` adds an
        encryption of new templates at free positions while the decryption bound holds; 1: never)."""
        return 1

    def add_arrays(self, settings, pub, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The stored array of the sum of two blocks' ciphertexts (homomorphic addition, seed 003 §3.1)."""
        raise NotImplementedError

    def concat_scores(self, parts: list):
        """Shards' IP_DB messages joined in block order: the message one process builds over all blocks."""
        return CKKSScores(np.concatenate([p.arrays for p in parts]), [c for p in parts for c in p.counts])

    # The IP_DB message on protocol ``ident``'s wire (``ScoreChunk.residues``, seed 003 §3.2; scale.ident)
    ip_db_ciphertexts = 2  # per block: HERS one (Σ y_j·ct_j), IDFace two (ct⁺, ct⁻)

    def score_layout(self, pub):
        """What a ``ScoreChunk`` is checked against: the residue shape of one block (CKKS) at the top level."""
        levels = pub._levels[tuple(pub.seal_context.first_parms_id())]
        return (self.ip_db_ciphertexts, 2, len(levels), pub.n)

    def score_block_bytes(self, pub) -> int:
        """Residue bytes of one block of the IP_DB message."""
        return 8 * int(np.prod((self.ip_db_ciphertexts, 2, 1, pub.n)))

    def residues(self, msg, lo: int, hi: int, pub) -> bytes:
        """Blocks lo … hi − 1 of the IP_DB message as ``ScoreChunk.residues``."""
        return np.ascontiguousarray(msg.arrays[lo:hi], dtype="<u8").tobytes()

    def scores_from_residues(self, raw: bytes, counts: list[int], layout):
        """The inverse of ``residues`` for blocks of ``counts`` templates; PrivfaceError on a wrong length."""
        expect = len(counts) * int(np.prod(layout)) * 8
        if len(raw) != expect:
            raise PrivfaceError(f"{len(raw)} residue bytes, expected {expect}")
        return CKKSScores(np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape((len(counts),) + layout), counts)


class HersGallery(GalleryScheme):
    """HERS (seed 003 §3.2): one CKKS ciphertext per template coordinate and block."""

    name = "hers"
    ip_db_ciphertexts = 1

    def public_scheme(self, settings, pub):
        return HERS(pub, settings.dim)

    def secret_scheme(self, settings, sec):
        return HERSKey(sec)

    def block_layout(self, settings, pub):
        return "uint32", (2, settings.dim, 2 * pub.n)

    def block_to_array(self, block, pub):
        return block.planes

    def block_from_array(self, arr, count, pub, what):
        return HERSBlock(arr, count)

    erasable = erases_every_empty_slot = reencrypt_erasure = True

    def erase(self, public, arr, count, keep, key, gone=None):
        """(array, report): block ``arr`` with the slots where ``keep`` is False zeroed (``HERS.erase``; ``gone``,
        the slots withdrawn by this change, is not needed: every empty slot is zeroed)."""
        block, report = public.erase(HERSBlock(arr, count), keep, key)
        return block.planes, report

    def max_sums(self, settings):
        """HERS_ERROR (2^−16) over the fresh CKKS error (≈ 2^−19, protocols.hers.params): the error of a sum of k
        encryptions grows as √k, so up to 64 keep a block's slots within the bound the tests assert."""
        return 64

    def add_arrays(self, settings, pub, a, b):
        q = np.uint64(pub._levels[tuple(pub.seal_context.first_parms_id())][0])
        low = np.uint64((1 << 30) - 1)
        full = [x[0].astype(np.uint64) | (x[1].astype(np.uint64) << np.uint64(30)) for x in (a, b)]
        s = full[0] + full[1]
        s -= q * (s >= q)
        return np.stack([s & low, s >> np.uint64(30)]).astype(np.uint32)


class IDFaceCKKSGallery(GalleryScheme):
    """IDFace over CKKS (seed 003 §4): T_α templates, packed, with the centring and lift recorded in the meta."""

    name = "idface-ckks"
    transform = True

    def tau_key(self, settings, centring):
        return idface_key(centring, settings.lift, settings.beta)

    def public_scheme(self, settings, pub):
        return IDFaceCKKS(pub, settings.idface_params())

    def secret_scheme(self, settings, sec):
        return IDFaceCKKSKey(sec, settings.idface_params())

    def block_layout(self, settings, pub):
        return "uint64", (2, settings.idface_params().width, 2, 1, pub.n)

    def block_from_array(self, arr, count, pub, what):
        return CKKSBlock(arr, count)

    erasable = True

    def erase(self, public, arr, count, keep, key, gone=None):
        """(array, report): block ``arr`` with the digits of the slots in ``gone`` (withdrawn by this change) set to
        0 by ``protocols.idface.erase`` — a masked refresh whose digit removal is a garbled circuit per column
        ciphertext and slot. ``key``: S_key's ``IDFaceCKKSKey`` (in process) or an object with ``open``,
        ``transfer``, ``close`` (``DigitEraseKey``'s). Other empty slots are left as they are (sealed ones hold no
        template)."""
        from ..protocols.idface.erase import DigitEraseHolder, DigitEraseKey, erase_digits

        slots = sorted(gone if gone is not None else np.flatnonzero(~keep[:count]).tolist())
        if not slots:
            return arr, {"bytes_sent": 0, "bytes_received": 0, "hiding_bits": 128.0}
        n, cols = public.public.n, arr.shape[0] * arr.shape[1]
        targets = np.array([(k, t % n, t // n) for t in slots for k in range(cols)], dtype=np.int64)
        k = DigitEraseKey(key.secret, key.params) if isinstance(key, IDFaceCKKSKey) else key
        out, report = erase_digits(DigitEraseHolder(public.public, public.params), k,
                                   np.ascontiguousarray(arr.reshape((cols,) + arr.shape[2:])), targets)
        # masking: perfect (uniform pads mod q); garbled circuits and OT: κ = 128 (computational)
        return out.reshape(arr.shape), {**report, "hiding_bits": 128.0}

    def max_sums(self, settings):
        """IP_DB sums β columns; NOISE_BOUND (2^12 < Δ/2) is asserted for sums of ≤ 512 fresh encryptions
        (protocols.idface.ckks), so a block may hold ⌊512 / β⌋ summed encryptions (β = 15: 34; the lift's
        β = 1365 is already at its own bound: 1)."""
        return max(1, 512 // settings.idface_params().beta)

    def add_arrays(self, settings, pub, a, b):
        q = np.uint64(pub._levels[tuple(pub.seal_context.first_parms_id())][0])
        s = a + b
        s -= q * (s >= q)
        return s


class IDFacePaillierGallery(IDFaceCKKSGallery):
    """IDFace over Paillier (seed 003 §4.3, §5): keys and block arrays are ``scale.paillier_blocks``'."""

    name = "idface-paillier"

    def erase(self, public, arr, count, keep, key, gone=None):
        """As idface-ckks's, over Paillier (``protocols.idface.paillier_erase``): the digits of the slots in
        ``gone`` set to 0 in all 2·D column ciphertexts, each re-randomised."""
        from ..protocols.idface.erase import erase_digits
        from ..protocols.idface.paillier_erase import PaillierEraseHolder, PaillierEraseKey

        pub = public.public
        slots = sorted(gone if gone is not None else np.flatnonzero(~keep[:count]).tolist())
        if not slots:
            return arr, {"bytes_sent": 0, "bytes_received": 0, "hiding_bits": 128.0}
        block = pb.block_from_array(arr, count, pub, "block")
        flat = [int(c) for col in block.columns for c in col]
        targets = np.array([(k, t) for t in slots for k in range(len(flat))], dtype=np.int64)
        k = PaillierEraseKey(key.secret, key.params) if isinstance(key, IDFacePaillierKey) else key
        out, report = erase_digits(PaillierEraseHolder(pub, public.params), k, flat, targets)
        d = len(block.columns[0])
        return pb.block_to_array(type(block)([out[:d], out[d:]], count), pub), {**report, "hiding_bits": 128.0}

    def generate_keypair(self, settings):
        pub, sec = pb.generate_keypair(settings.insecure_test_params)
        return pub, sec, pb.public_to_bytes(pub), pb.secret_to_bytes(sec)

    def load_public(self, settings, raw):
        return pb.public_from_bytes(raw, settings.insecure_test_params)

    def load_secret(self, settings, pub, raw):
        return pb.secret_from_bytes(pub, raw)

    def public_scheme(self, settings, pub):
        return IDFacePaillier(pub, settings.idface_params())

    def secret_scheme(self, settings, sec):
        return IDFacePaillierKey(sec, settings.idface_params())

    def public_meta(self, pub):
        """The public key N (hex) in the meta too, checked against the ``pk`` record on load."""
        return {"paillier_n": format(int(pub.n), "x")}

    def block_layout(self, settings, pub):
        return "uint8", pb.block_shape(pub, settings.idface_params().width)

    def block_to_array(self, block, pub):
        return pb.block_to_array(block, pub)

    def max_sums(self, settings):
        return 1 << 30  # Paillier adds exactly (a product mod N²), without noise

    def add_arrays(self, settings, pub, a, b):
        x, y = (pb.block_from_array(arr, 1, pub, "block") for arr in (a, b))
        nsq = pub.nsquare
        cols = [[u * v % nsq for u, v in zip(cu, cv)] for cu, cv in zip(x.columns, y.columns)]
        return pb.block_to_array(type(x)(cols, 1), pub)

    def block_from_array(self, arr, count, pub, what):
        return pb.block_from_array(arr, count, pub, what)

    def concat_scores(self, parts):
        return pb.concat_scores(parts)

    def score_layout(self, pub):
        return pub  # every ciphertext is checked to be a unit of Z_N² (pb.scores_from_bytes)

    def score_block_bytes(self, pub):
        return 2 * pub.ciphertext_bytes

    def residues(self, msg, lo, hi, pub):
        return pb.scores_to_bytes(PaillierScores(msg.values[lo:hi], msg.counts[lo:hi]), pub)

    def scores_from_residues(self, raw, counts, layout):
        return pb.scores_from_bytes(raw, counts, layout)


class CryptoMaskGallery(GalleryScheme):
    """cryptomask (seed 001): BFV galleries appended batch by batch (Alg. 1), answered with 1 bit (Alg. 2–3)."""

    name = "cryptomask"
    own_layout = True

    def enrol(self, gallery_url: str, source, **options):
        return cryptomask_gallery.enrol(gallery_url, source, **options)

    def identify(self, query, gallery_url: str, **options) -> dict:
        return cryptomask_identify.identify(query, gallery_url, **options)


GALLERY_SCHEMES: dict[str, GalleryScheme] = {
    s.name: s for s in (IDFaceCKKSGallery(), HersGallery(), IDFacePaillierGallery(), CryptoMaskGallery())}
BLOCK_SCHEMES = tuple(name for name, s in GALLERY_SCHEMES.items() if not s.own_layout)


def gallery_scheme(name: str, *, blocks: bool = False) -> GalleryScheme:
    """The adapter registered as ``name`` (``blocks``: only a scheme of ``scale.gallery``'s block layout)."""
    scheme = GALLERY_SCHEMES.get(name)
    if scheme is None or (blocks and scheme.own_layout):
        raise GalleryError(f"--scheme must be one of {BLOCK_SCHEMES if blocks else tuple(GALLERY_SCHEMES)}, "
                           f"got {name!r}")
    return scheme
