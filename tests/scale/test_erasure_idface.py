"""Erasure for idface-ckks galleries (issue 37 item 3): after ``gallery remove | update`` with S_key, the key holder
decrypting every column ciphertext of every block finds the removed identities' base-p digits at 0 and every other
digit as before, none of the old block's bytes is left in the store's files, and an identification with the removed
template finds nobody. Toy CKKS (N = 2048, insecure_test_params) but real SEAL, real garbled circuits and OT
extension (``protocols.idface.erase``); SQLite, and PostgreSQL when CI provides one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from privface.crypto import seal_arrays
from privface.crypto.paillier import PaillierCiphertext
from privface.errors import CryptoError, ProtocolError
from privface.protocols.idface.ckks import NOISE_BITS
from privface.protocols.idface.erase import DigitEraseHolder, DigitEraseKey, digit_circuit
from privface.protocols.idface.transform import decode
from privface.scale import NpySource, enrol, identify
from privface.scale.gallery import Gallery, key_server
from privface.scale.lifecycle import erase_withdrawn, list_ids, update, withdraw
from tests.helpers.erasure import (
    ENV,
    after_lease_expiry,
    assert_gone_from_postgres,
    kill_runs,
    postgres_bytes,
    store_files,
    windows,
)

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")
TAU = 14.0  # self-score 15 (β = 15), a stranger among 2 100 reaches 10 now and then


def _templates(n, seed, dim=128):
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _gallery(tmp_path, n=2100, url=None, name="default", keys=None, insecure=True, lift=None, tau=TAU):
    """n > N = 2048: slots in digits 0 and 1 of the coefficients (p = 16, β = 15 at d = 128)."""
    x = _templates(n, 5)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = url or f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), "idface-ckks", tau=tau, insecure_test_params=insecure, name=name,
          key_store_url=keys, lift=lift)
    return url, x


def digits(url, name="default", keys=None) -> list[np.ndarray]:
    """What the key holder finds in every block: the base-p digit of every slot in every column ciphertext,
    (slots, 2·width) per block (decrypt, round by Δ, decode)."""
    g = Gallery(url, name)
    key = key_server(g, keys).secret
    pub, p = key.public, key.params.base
    out = []
    for block in g.load_blocks()[0]:
        cts = block.data.reshape(-1, 2, 1, pub.n)
        coeffs = seal_arrays.inverse_ntt(pub.seal_context, pub.evaluator, key.parms_id, key._decrypt(cts))[:, 0]
        v = np.where(coeffs > np.uint64(key.q // 2), np.uint64(0), coeffs)  # valid encodings are ≥ 0
        rounded = (v + np.uint64(1 << (NOISE_BITS - 1))) >> np.uint64(NOISE_BITS)
        d = decode(rounded, p, key.m)  # (m, columns, n)
        out.append(d.transpose(0, 2, 1).reshape(key.m * pub.n, -1))  # slot t = (digit t // n, coefficient t % n)
    return out


def block_bytes(url, name="default") -> bytes:
    return np.ascontiguousarray(Gallery(url, name).load_blocks()[0][0].data).tobytes()


def test_remove_zeroes_the_digits_and_leaves_no_old_byte(tmp_path):
    url, x = _gallery(tmp_path)
    before, old = digits(url)[0], block_bytes(url)
    assert before[:2100].any(axis=1).all() and not before[2100:].any()  # every template has set bits; the rest 0
    assert all(w in store_files(tmp_path) for w in windows(old, k=8))
    report = withdraw(url, ["e.3", "e.2090"], key=key_server(Gallery(url)).secret)
    assert report["erased"] is True and report["blocks_written"] == 1 and report["erase_hiding_bits"] >= 128
    after = digits(url)[0]
    assert not after[[3, 2090]].any()  # slot 3: digit 0, slot 2090: digit 1 of coefficient 42
    kept = np.ones(len(after), dtype=bool)
    kept[[3, 2090]] = False
    assert np.array_equal(after[kept], before[kept])
    assert not any(w in store_files(tmp_path) for w in windows(old))  # no 64-byte window of the old block left
    assert not (tmp_path / "g.db-wal").exists() or (tmp_path / "g.db-wal").stat().st_size == 0
    assert identify(x[3], url)["id"] is None and identify(x[2090], url)["id"] is None
    assert identify(x[4], url)["id"] == "e.4" and identify(x[2089], url)["id"] == "e.2089"
    assert "e.3" not in list_ids(url)
    with pytest.raises(Exception, match="only hers"):  # what was erased here is not "withdrawn only"
        erase_withdrawn(url, key=key_server(Gallery(url)).secret)


def test_update_erases_the_old_template(tmp_path):
    url, x = _gallery(tmp_path, n=30)
    old = block_bytes(url)
    y = _templates(1, 9)
    np.save(tmp_path / "e.npy", y.astype(np.float32))  # id e.0
    before = digits(url)[0]
    report = update(url, NpySource([tmp_path / "e.npy"]), key=key_server(Gallery(url)).secret)
    assert report["erased"] is True and report["replaced"] == 1
    after = digits(url)[0]
    assert not after[0].any() and after[30].any() and np.array_equal(after[1:30], before[1:30])
    assert not any(w in store_files(tmp_path) for w in windows(old))
    assert identify(y[0], url)["id"] == "e.0" and identify(x[0], url)["id"] is None


def test_cli_remove_erases_and_says_so(tmp_path):
    url, x = _gallery(tmp_path, n=6)
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "remove", "--gallery", url, "e.2", "--json"],
                       env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["erased"] is True and got["withdrawn"] == ["e.2"] and "NOT erased" not in r.stderr
    assert not digits(url)[0][2].any() and digits(url)[0][3].any()
    assert identify(x[2], url)["id"] is None and identify(x[3], url)["id"] == "e.3"


def test_the_key_holder_sees_uniform_values_and_checks_what_it_gets(tmp_path):
    """S_key's decryption of the masked block is spread over Z_q (not the small Δ·V of the gallery); each garbled
    circuit computes y = Δ·p^i·b_i + s mod q (plain evaluation against the digits); malformed messages and a forged
    output label are refused, and nothing is written."""
    url, x = _gallery(tmp_path, n=6)
    g, key = Gallery(url), key_server(Gallery(url)).secret
    pub, params = key.public, key.params
    cts = g.load_blocks()[0][0].data.reshape(-1, 2, 1, pub.n)
    holder = DigitEraseHolder(pub, params)
    request = holder.start(cts, [(0, 3, 0)])
    w = seal_arrays.inverse_ntt(pub.seal_context, pub.evaluator, key.parms_id, key._decrypt(request["masked"]))
    assert np.median(w[:, 0, :6].astype(np.float64)) > 2.0 ** 55  # the plain coefficients are < 2^18 here
    circuit, q = digit_circuit(key.q, params.base, key.m, 1), key.q
    for V, b in ((16 ** 2 + 1, 0), (16 ** 3 + 16 + 1, 1), (16, 1), (0, 0)):  # digits are bits
        for e in (-(1 << 12), 0, (1 << 12)):
            r, s = int.from_bytes(os.urandom(8), "little") % q, int.from_bytes(os.urandom(8), "little") % q
            wv = ((V << NOISE_BITS) + e + r) % q
            bits = circuit.evaluate(_b(wv), _b((r - (1 << (NOISE_BITS - 1))) % q) + _b(s))
            assert sum(v << k for k, v in enumerate(bits)) == ((b * 16 << NOISE_BITS) + s) % q
    greedy = [digit_circuit(q, 1366, 4, i) for i in range(4)]  # the lift's base: p not a power of two
    V = 1366 ** 3 + 1366 + 1  # digits (1, 1, 0, 1)
    for i, b in enumerate((1, 1, 0, 1)):
        r, s = int.from_bytes(os.urandom(8), "little") % q, int.from_bytes(os.urandom(8), "little") % q
        wv = ((V << NOISE_BITS) - 77 + r) % q
        bits = greedy[i].evaluate(_b(wv), _b((r - (1 << (NOISE_BITS - 1))) % q) + _b(s))
        assert sum(v << k for k, v in enumerate(bits)) == ((b * 1366 ** i << NOISE_BITS) + s) % q
    eraser = DigitEraseKey(key.secret, key.params)
    with pytest.raises(ProtocolError):
        eraser.open({"masked": request["masked"][:, :, :, :7], "targets": request["targets"]})
    with pytest.raises(ProtocolError):
        eraser.open({"masked": request["masked"], "targets": np.array([[0, pub.n, 0]])})

    class Forger:
        """Returns an output label of its own instead of the circuit's."""

        def __init__(self):
            self.k = DigitEraseKey(key.secret, key.params)

        def open(self, req):
            return self.k.open(req)

        def transfer(self, reply):
            return self.k.transfer(reply)

        def close(self, outputs):
            return self.k.close([bytes(16) + o[16:] for o in outputs])

    old = block_bytes(url)
    with pytest.raises(CryptoError):
        withdraw(url, ["e.1"], key=Forger())
    assert block_bytes(url) == old and "e.1" in list_ids(url)


def _b(v: int, k: int = 60) -> list[int]:
    return [(v >> i) & 1 for i in range(k)]


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_remove_erases(tmp_path):
    """PostgreSQL: the erased block is new rows, the old rows deleted; after the operator's VACUUM (FULL)
    (docs/operations.md) no old window is in the table's files."""
    import secrets


    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    url, x = _gallery(tmp_path, n=20, url=PG_URL, name=name, keys=keys)
    before, old = digits(url, name, keys)[0], block_bytes(url, name)
    report = withdraw(url, ["e.5"], name, key=key_server(Gallery(url, name), keys).secret)
    assert report["erased"] is True
    after = digits(url, name, keys)[0]
    assert not after[5].any() and np.array_equal(np.delete(after, 5, 0), np.delete(before, 5, 0))
    assert identify(x[5], url, key_store_url=keys, name=name)["id"] is None
    assert identify(x[6], url, key_store_url=keys, name=name)["id"] == "e.6"
    assert_gone_from_postgres(PG_URL, name, windows(old))


@pytest.mark.slow
def test_remove_erases_at_real_parameters_with_the_lift(tmp_path):
    """HERS_CKKS (N = 8192), d = 128 lifted to D = 2048 (p = 1366, not a power of two: the greedy digit circuit),
    the deployment's setting: the removed slot's digits are 0 in all 4096 column ciphertexts, the others unchanged,
    the old block's bytes gone, and the removed template is no longer found."""
    url, x = _gallery(tmp_path, n=8, insecure=False, lift=2048, tau=600.0)  # self-score 1365, strangers ≈ ±40
    before, old = digits(url)[0], block_bytes(url)
    report = withdraw(url, ["e.6"], key=key_server(Gallery(url)).secret)
    assert report["erased"] is True
    after = digits(url)[0]
    assert not after[6].any() and before[6].any() and np.array_equal(np.delete(after, 6, 0), np.delete(before, 6, 0))
    assert not any(w in store_files(tmp_path) for w in windows(old, k=64))
    assert identify(x[6], url)["id"] is None and identify(x[2], url)["id"] == "e.2"


# ------------------------------------------------------------------------------------------ idface-paillier
def _paillier_gallery(tmp_path, n=40, url=None, name="default", keys=None):
    """Toy Paillier (512-bit N): p = 16, m = 127 templates per block, so n = 140 makes two blocks."""
    x = _templates(n, 6)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = url or f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), "idface-paillier", tau=TAU, insecure_test_params=True, name=name,
          key_store_url=keys)
    return url, x


def paillier_digits(url, name="default", keys=None) -> list[np.ndarray]:
    """What the key holder finds: every column plaintext of every block decoded, (m slots, 2·width) per block."""
    from privface.protocols.idface.paillier import _digits

    g = Gallery(url, name)
    key = key_server(g, keys).secret
    out = []
    for block in g.load_blocks()[0]:
        cols = [key.secret.decrypt(PaillierCiphertext(key.public, c)) for col in block.columns for c in col]
        out.append(np.stack([_digits(v, key.params.base, key.m) for v in cols], axis=1))
    return out


def paillier_bytes(url, name="default", b=0) -> bytes:
    from privface.scale import paillier_blocks as pb

    g = Gallery(url, name)
    return pb.block_to_array(g.load_blocks([b])[0][0], g.public_context).tobytes()


def test_paillier_remove_zeroes_the_digits_and_leaves_no_old_byte(tmp_path):
    url, x = _paillier_gallery(tmp_path, n=140)
    before, old = paillier_digits(url), [paillier_bytes(url, b=b) for b in (0, 1)]
    assert before[0][:127].any(axis=1).all() and set(np.unique(before[0])) <= {0, 1}
    report = withdraw(url, ["e.3", "e.126"], key=key_server(Gallery(url)).secret)
    assert report["erased"] is True and report["blocks_written"] == 1
    after = paillier_digits(url)
    assert not after[0][[3, 126]].any()
    kept = np.ones(len(after[0]), dtype=bool)
    kept[[3, 126]] = False
    assert np.array_equal(after[0][kept], before[0][kept]) and np.array_equal(after[1], before[1])
    files = store_files(tmp_path)
    assert not any(w in files for w in windows(old[0]))  # block 0: every column re-randomised
    assert all(w in files for w in windows(old[1], k=8))  # block 1 untouched
    assert identify(x[3], url)["id"] is None and identify(x[126], url)["id"] is None
    assert identify(x[4], url)["id"] == "e.4" and identify(x[130], url)["id"] == "e.130"


def test_paillier_update_erases_the_old_template(tmp_path):
    url, x = _paillier_gallery(tmp_path, n=20)
    old = paillier_bytes(url)
    before = paillier_digits(url)[0]
    y = _templates(1, 9)
    np.save(tmp_path / "e.npy", y.astype(np.float32))  # id e.0
    report = update(url, NpySource([tmp_path / "e.npy"]), key=key_server(Gallery(url)).secret)
    assert report["erased"] is True
    after = paillier_digits(url)[0]
    assert not after[0].any() and after[20].any() and np.array_equal(after[1:20], before[1:20])
    assert not any(w in store_files(tmp_path) for w in windows(old))
    assert identify(y[0], url)["id"] == "e.0" and identify(x[0], url)["id"] is None


def test_paillier_digit_circuit_reads_the_digit_through_the_wrap():
    """U = V + R mod N wraps for R > N − V: the circuit still finds b_i (plain evaluation), for p = 16 and the
    lift's p = 1366."""
    from privface.protocols.idface.paillier_erase import digit_circuit as paillier_circuit

    N = (1 << 511) + 187  # any modulus: the circuit only uses N's bits
    for p, digits_ in ((16, (1, 0, 1, 1, 0, 1)), (1366, (1, 1, 0, 1))):
        V = sum(b * p ** k for k, b in enumerate(digits_))
        for i, b in enumerate(digits_):
            M = p ** (i + 1)
            for R in (5, N - V + 3, N - 1, int.from_bytes(os.urandom(64), "little") % N):
                U = (V + R) % N
                for rho in (0, 1):
                    got = paillier_circuit(N, p, i).evaluate(
                        _b(U, 512) + _b(U % M, M.bit_length()), _b(R, 512) + _b(R % M, M.bit_length()) + [rho])
                    assert got == (b ^ rho,)


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_paillier_postgres_remove_erases(tmp_path):
    import secrets

    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    url, x = _paillier_gallery(tmp_path, n=20, url=PG_URL, name=name, keys=keys)
    before, old = paillier_digits(url, name, keys)[0], paillier_bytes(url, name)
    assert withdraw(url, ["e.5"], name, key=key_server(Gallery(url, name), keys).secret)["erased"] is True
    after = paillier_digits(url, name, keys)[0]
    assert not after[5].any() and np.array_equal(np.delete(after, 5, 0), np.delete(before, 5, 0))
    assert identify(x[5], url, key_store_url=keys, name=name)["id"] is None
    live, _ = postgres_bytes(PG_URL, name)
    assert not any(w in live for w in windows(old))


def test_kill_9_during_an_erasing_remove_leaves_it_done_or_not_done(tmp_path, monkeypatch):
    """`privface gallery remove` (idface-ckks, erasing) killed at a random moment, on a fresh copy each time: the
    gallery loads, the id is either still answered with its digits intact or gone with its digits 0, and a re-run
    (once the dead process's lease expired) finishes the erasure."""
    _, x = _gallery(tmp_path, n=30)
    before = digits(f"sqlite:///{tmp_path}/g.db")[0]

    def check(url, killed):
        got, done = digits(url)[0], "e.7" not in list_ids(url)
        assert np.array_equal(np.delete(got, 7, 0), np.delete(before, 7, 0))
        assert (not got[7].any()) if done else np.array_equal(got[7], before[7])
        if not done:
            after_lease_expiry(monkeypatch, lambda: withdraw(url, ["e.7"], key=key_server(Gallery(url)).secret))
        assert not digits(url)[0][7].any() and identify(x[7], url)["id"] is None
        assert identify(x[8], url)["id"] == "e.8"
        return done

    kill_runs(tmp_path, ("g.db", "g.keys.db"), lambda url: ["-m", "privface.cli", "gallery", "remove", "--gallery",
                                                              url, "e.7"], check, delay=(2.0, 15.0))


def test_paillier_kill_9_during_an_erasing_remove_leaves_it_done_or_not_done(tmp_path, monkeypatch):
    """As the CKKS test above, for idface-paillier: the digits of e.5 intact (still answered) or 0 (gone), the others
    unchanged, and a re-run finishes it."""
    _, x = _paillier_gallery(tmp_path, n=20)
    before = paillier_digits(f"sqlite:///{tmp_path}/g.db")[0]

    def check(url, killed):
        got, done = paillier_digits(url)[0], "e.5" not in list_ids(url)
        assert np.array_equal(np.delete(got, 5, 0), np.delete(before, 5, 0))
        assert (not got[5].any()) if done else np.array_equal(got[5], before[5])
        if not done:
            after_lease_expiry(monkeypatch, lambda: withdraw(url, ["e.5"], key=key_server(Gallery(url)).secret))
        assert not paillier_digits(url)[0][5].any() and identify(x[5], url)["id"] is None
        return done

    kill_runs(tmp_path, ("g.db", "g.keys.db"), lambda url: ["-m", "privface.cli", "gallery", "remove", "--gallery",
                                                              url, "e.5"], check, delay=(1.0, 10.0))
