"""Enrolment proofs Π_en of gsm (seed 004 §8, Fig. 9, Fig. 10; Π_epk = CGGMP20 Fig. 16): completeness on toy
and one real-size key, soundness against malformed moduli, unknown plaintexts, wrong norms and tampering,
and strict parsing of every proof object. Toy keys unless marked slow."""
from __future__ import annotations

import dataclasses
import secrets

import gmpy2
import pytest

from privface.crypto.numbers import crt, multiexp, random_prime
from privface.crypto.paillier import PaillierPrivateKey, PaillierPublicKey, generate_paillier_keypair
from privface.errors import CryptoError, ProtocolError
from privface.protocols.gsm import zk
from privface.protocols.gsm.messages import key_width

BITS = 512
CTX = b"test-enrol"


@pytest.fixture(scope="module")
def keys():
    return generate_paillier_keypair(BITS, insecure_test_params=True, blum=True)


@pytest.fixture(scope="module")
def template():
    return [secrets.randbelow(255) - 127 for _ in range(16)]


@pytest.fixture(scope="module")
def enrolled(keys, template):
    _, sk = keys
    return zk.encrypt_with_witness(sk, template)


def _norm_run(pk, sk, cs, y) -> bool:
    """One Fig. 10 run through the wire: V's challenge, P's response, V's decision."""
    verifier = zk.NormVerifier(pk, cs, y)
    challenge = zk.NormChallenge.from_bytes(verifier.challenge().to_bytes(), pk, len(cs))
    response = zk.norm_response(sk, challenge, len(cs))
    return verifier.verify(zk.NormResponse.from_bytes(response.to_bytes()))


# ---------------------------------------------------------------- key generation and Π_epk


def test_blum_keygen_is_opt_in_and_gives_blum_primes(keys):
    _, sk = keys
    assert sk.p % 4 == 3 and sk.q % 4 == 3
    _, plain = generate_paillier_keypair(BITS, insecure_test_params=True)
    assert plain.p * plain.q == plain.public_key.n  # existing callers unchanged


def test_modulus_proof_completeness_through_bytes(keys):
    pk, sk = keys
    data = zk.prove_modulus(sk, context=CTX).to_bytes()
    proof = zk.ModulusProof.from_bytes(data, pk)
    assert zk.verify_modulus(pk, proof, context=CTX)
    assert not zk.verify_modulus(pk, proof, context=b"another session")  # Fiat–Shamir binds the context


def test_modulus_proof_is_bound_to_its_modulus(keys):
    pk, sk = keys
    other_pk, _ = generate_paillier_keypair(BITS, insecure_test_params=True, blum=True)
    proof = zk.prove_modulus(sk, context=CTX)
    moved = zk.ModulusProof(proof.n_bytes, proof.w % other_pk.n, [x % other_pk.n for x in proof.x],
                            [z % other_pk.n for z in proof.z], proof.ab)
    assert not zk.verify_modulus(other_pk, moved, context=CTX)


def test_prover_refuses_a_non_blum_key():
    _, sk = generate_paillier_keypair(BITS, insecure_test_params=True)
    while sk.p % 4 == 3 and sk.q % 4 == 3:
        _, sk = generate_paillier_keypair(BITS, insecure_test_params=True)
    with pytest.raises(CryptoError, match="blum=True"):
        zk.prove_modulus(sk)


def _best_effort_modulus_proof(n, primes, context=CTX) -> zk.ModulusProof:
    """A cheating prover who knows every prime factor of a malformed N and answers every round it can:
    N-th roots via N⁻¹ mod λ(N) where it exists, 4th roots by CRT over the distinct primes."""
    distinct = sorted(set(primes))
    lam = 1
    for p in distinct:
        lam = gmpy2.lcm(lam, (p - 1) * p ** (primes.count(p) - 1))
    n_inv = gmpy2.invert(n, lam) if gmpy2.gcd(n, lam) == 1 else None
    while True:
        w = secrets.randbelow(n)
        if gmpy2.jacobi(w, n) == -1:
            break
    xs, zs, ab = [], [], bytearray()
    for y in zk._mod_challenges(gmpy2.mpz(n), gmpy2.mpz(w), zk.MOD_ROUNDS, context):
        zs.append(int(gmpy2.powmod(y, n_inv, n)) if n_inv is not None else secrets.randbelow(n))
        answer = (0, secrets.randbelow(n))
        for bits in range(4):
            t = (-y if bits & 1 else y) * (w if bits & 2 else 1) % n
            if all(gmpy2.legendre(t, p) == 1 for p in distinct) and len(distinct) == len(primes):
                roots = [gmpy2.powmod(t, ((p + 1) // 4) ** 2 % (p - 1), p) for p in distinct]
                x, m = roots[0], distinct[0]
                for r, p in zip(roots[1:], distinct[1:]):
                    x, m = crt(r, x, p, m, gmpy2.invert(m, p)), m * p
                answer = (bits, x)
                break
        ab.append(answer[0])
        xs.append(int(answer[1]))
    return zk.ModulusProof(key_width(n), int(w), xs, zs, bytes(ab))


def _blum_prime(bits):
    return random_prime(bits, 3, 2)


def test_the_cheating_prover_helper_passes_on_a_good_modulus(keys):
    """Guards the soundness tests below: the same best-effort prover succeeds when N is well formed."""
    pk, sk = keys
    assert zk.verify_modulus(pk, _best_effort_modulus_proof(int(pk.n), [int(sk.p), int(sk.q)]), context=CTX)


def test_modulus_with_three_primes_is_rejected():
    primes = [_blum_prime(172), _blum_prime(170), _blum_prime(170)]
    n = primes[0] * primes[1] * primes[2]
    pk = PaillierPublicKey(n, insecure_test_params=True)
    assert not zk.verify_modulus(pk, _best_effort_modulus_proof(int(n), [int(p) for p in primes]), context=CTX)


def test_modulus_with_a_square_factor_is_rejected():
    p, q = _blum_prime(170), _blum_prime(172)
    n = p * p * q
    pk = PaillierPublicKey(n, insecure_test_params=True)
    assert not zk.verify_modulus(pk, _best_effort_modulus_proof(int(n), [int(p), int(p), int(q)]), context=CTX)


def test_modulus_with_a_small_factor_is_rejected(keys):
    """A Blum N = p·q with p = 65519 < 2^16 passes Π^mod's equations, but the public small-factor check refuses it."""
    p = 65519
    assert gmpy2.is_prime(p) and p % 4 == 3
    while True:
        q = _blum_prime(BITS - 2)
        if gmpy2.gcd(p * q, (p - 1) * (q - 1)) == 1:
            break
    pk = PaillierPublicKey(p * q, insecure_test_params=True)
    sk = PaillierPrivateKey(pk, p, q)
    for _ in range(10):  # a challenge y_i divisible by the small p (≈ 128/65519) stops the prover: draw again
        try:
            proof = zk.prove_modulus(sk, context=CTX)
            break
        except CryptoError:
            continue
    n, w = gmpy2.mpz(pk.n), gmpy2.mpz(proof.w)
    ys = zk._mod_challenges(n, w, zk.MOD_ROUNDS, CTX)
    assert all(gmpy2.powmod(z, n, n) == y for z, y in zip(proof.z, ys))  # the equations hold
    assert not zk.verify_modulus(pk, proof, context=CTX)


def test_tampered_modulus_proof_is_rejected(keys):
    pk, sk = keys
    data = bytearray(zk.prove_modulus(sk, context=CTX).to_bytes())
    rejected = 0
    for pos in (len(data) // 3, len(data) // 2, len(data) - 2):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        try:
            rejected += not zk.verify_modulus(pk, zk.ModulusProof.from_bytes(bytes(bad), pk), context=CTX)
        except ProtocolError:
            rejected += 1
    assert rejected == 3


@pytest.mark.parametrize("mutate, match", [
    (lambda p: zk.ModulusProof(p.n_bytes, p.w, p.x[:-1], p.z[:-1], p.ab[:-1]), "exactly"),
    (lambda p: zk.ModulusProof(p.n_bytes, p.w, p.x, p.z, b"\x04" + p.ab[1:]), "bits"),
    (lambda p: zk.ModulusProof(p.n_bytes, 0, p.x, p.z, p.ab), "not in"),
])
def test_malformed_modulus_proof_raises(keys, mutate, match):
    pk, sk = keys
    bad = mutate(zk.prove_modulus(sk, context=CTX))
    with pytest.raises(ProtocolError, match=match):
        zk.verify_modulus(pk, bad, context=CTX)
    with pytest.raises(ProtocolError, match=match):
        zk.ModulusProof.from_bytes(bad.to_bytes(), pk)


def test_modulus_proof_value_out_of_range_is_refused(keys):
    pk, sk = keys
    proof = zk.prove_modulus(sk, context=CTX)
    proof.z[5] = int(pk.n) + 1
    with pytest.raises(ProtocolError, match="not in"):
        zk.ModulusProof.from_bytes(proof.to_bytes(), pk)
    with pytest.raises(ProtocolError, match="malformed"):
        zk.ModulusProof.from_bytes(b"PFw\x01garbage", pk)


# ---------------------------------------------------------------- Fig. 9: plaintext knowledge


def test_encrypt_with_witness_is_exact(keys, template, enrolled):
    pk, sk = keys
    cs, wit = enrolled
    assert [sk.decrypt_signed(c) for c in cs] == template
    for c, (x, r) in zip(cs, wit):
        assert c.value == pk.plain_factor(x) * gmpy2.powmod(r, pk.n, pk.nsquare) % pk.nsquare


def test_plaintext_knowledge_completeness_through_bytes(keys, enrolled):
    pk, _ = keys
    cs, wit = enrolled
    data = zk.prove_plaintext_knowledge(pk, cs, wit, context=CTX).to_bytes()
    proof = zk.PlaintextKnowledgeProof.from_bytes(data, pk)
    assert zk.verify_plaintext_knowledge(pk, cs, proof, context=CTX)
    assert not zk.verify_plaintext_knowledge(pk, cs, proof, context=b"other")
    assert not zk.verify_plaintext_knowledge(pk, cs[::-1], proof, context=CTX)


def test_ciphertext_with_unknown_plaintext_is_rejected(keys, enrolled):
    """A cheating prover swaps one ciphertext for a random element of Z*_{N²} and proves with the witness it has."""
    pk, _ = keys
    cs, wit = enrolled
    forged = list(cs)
    forged[7] = pk.ciphertext(gmpy2.mpz(secrets.randbelow(int(pk.nsquare))) | 1)
    proof = zk.prove_plaintext_knowledge(pk, forged, wit, context=CTX)
    assert not zk.verify_plaintext_knowledge(pk, forged, proof, context=CTX)


def test_someone_elses_ciphertexts_cannot_be_proven(keys, template):
    """Ciphertexts copied from another enrolment under the same key: the copier knows neither x nor r."""
    pk, sk = keys
    cs, _ = zk.encrypt_with_witness(sk, template)
    guessed = [(x % int(pk.n), gmpy2.mpz(secrets.randbelow(int(pk.n)))) for x in template]
    proof = zk.prove_plaintext_knowledge(pk, cs, guessed, context=CTX)
    assert not zk.verify_plaintext_knowledge(pk, cs, proof, context=CTX)


def test_tampered_plaintext_knowledge_proof_is_rejected(keys, enrolled):
    pk, _ = keys
    cs, wit = enrolled
    data = zk.prove_plaintext_knowledge(pk, cs, wit, context=CTX).to_bytes()
    for pos in (20, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[pos] ^= 0x04
        try:
            assert not zk.verify_plaintext_knowledge(pk, cs, zk.PlaintextKnowledgeProof.from_bytes(bytes(bad), pk),
                                                     context=CTX)
        except ProtocolError:
            pass


def test_plaintext_knowledge_refuses_bad_inputs(keys, enrolled):
    pk, _ = keys
    cs, wit = enrolled
    good = zk.prove_plaintext_knowledge(pk, cs, wit, context=CTX)
    with pytest.raises(ProtocolError, match="not in"):
        zk.verify_plaintext_knowledge(pk, cs, zk.PlaintextKnowledgeProof(good.n_bytes, good.a, good.w, int(pk.n)),
                                      context=CTX)
    with pytest.raises(ProtocolError, match="not in"):
        zk.verify_plaintext_knowledge(pk, cs, zk.PlaintextKnowledgeProof(good.n_bytes, int(pk.n), good.w, good.z),
                                      context=CTX)
    with pytest.raises(ProtocolError, match="at least one"):
        zk.verify_plaintext_knowledge(pk, [], good, context=CTX)
    other_pk, other_sk = generate_paillier_keypair(BITS, insecure_test_params=True)
    with pytest.raises(ProtocolError, match="under the proof's key"):
        zk.verify_plaintext_knowledge(pk, [other_pk.encrypt(1)], good, context=CTX)
    with pytest.raises(CryptoError, match="one"):
        zk.prove_plaintext_knowledge(pk, cs, wit[:-1])


# ---------------------------------------------------------------- Fig. 10: L2 norm


def test_norm_proof_completeness(keys, template, enrolled):
    pk, sk = keys
    cs, _ = enrolled
    assert _norm_run(pk, sk, cs, sum(x * x for x in template))


@pytest.mark.parametrize("delta", [1, -1, 1000])
def test_wrong_norm_is_rejected(keys, template, enrolled, delta):
    pk, sk = keys
    cs, _ = enrolled
    assert not _norm_run(pk, sk, cs, sum(x * x for x in template) + delta)


def test_template_whose_norm_differs_is_rejected(keys, template):
    """The device encrypts a template with one component changed but claims the enrolled norm ζ²."""
    pk, sk = keys
    cheat = list(template)
    cheat[3] += 50
    cs, _ = zk.encrypt_with_witness(sk, cheat)
    assert not _norm_run(pk, sk, cs, sum(x * x for x in template))


def test_norm_right_mod_n_but_not_over_the_integers_is_caught_by_the_second_check(keys, template):
    """x_0 = √(y − Σ_{i>0} x_i² + 5) mod N (the prover knows p, q): Σ x_i² ≡ y + 5 (mod N) with a huge x_0.
    Claiming y + 5 passes the mod-N check of Fig. 10 but not the mod-N̂ one."""
    pk, sk = keys
    n, p, q = int(pk.n), int(sk.p), int(sk.q)
    rest = template[1:]
    y = sum(x * x for x in template) + 5
    while True:
        target = (y - sum(x * x for x in rest)) % n
        if gmpy2.legendre(target, p) == 1 and gmpy2.legendre(target, q) == 1:
            break
        rest[0] += 1
        y = sum(x * x for x in template) + 5
    # a "mixed" square root (+√ mod p, −√ mod q) is never a small integer, even when target is a small square
    x0 = int(crt(gmpy2.powmod(target, (p + 1) // 4, p), -gmpy2.powmod(target, (q + 1) // 4, q) % q, p, q,
                 gmpy2.invert(q, p)))
    assert (x0 * x0 + sum(x * x for x in rest)) % n == y % n and x0 * x0 + sum(x * x for x in rest) != y
    cs, _ = zk.encrypt_with_witness(sk, [x0, *rest])
    verifier = zk.NormVerifier(pk, cs, y)
    response = zk.norm_response(sk, verifier.challenge(), len(cs))
    alpha, beta, _, _ = verifier._secrets
    assert response.z == (alpha * alpha * y + beta) % n  # the first check alone would accept
    assert not verifier.verify(response)


def test_tampered_norm_response_is_rejected(keys, template, enrolled):
    pk, sk = keys
    cs, _ = enrolled
    verifier = zk.NormVerifier(pk, cs, sum(x * x for x in template))
    response = zk.norm_response(sk, verifier.challenge(), len(cs))
    bad = bytearray(response.to_bytes())
    bad[-1] ^= 0x01
    assert not verifier.verify(zk.NormResponse.from_bytes(bytes(bad)))


def test_norm_verifier_is_single_use_and_refuses_bad_responses_without_state_change(keys, template, enrolled):
    pk, sk = keys
    cs, _ = enrolled
    verifier = zk.NormVerifier(pk, cs, sum(x * x for x in template))
    with pytest.raises(ProtocolError, match="before challenge"):
        verifier.verify(zk.NormResponse(key_width(pk.n), 0, 0))
    challenge = verifier.challenge()
    with pytest.raises(ProtocolError, match="already issued"):
        verifier.challenge()
    response = zk.norm_response(sk, challenge, len(cs))
    with pytest.raises(ProtocolError, match="Z_N"):
        verifier.verify(zk.NormResponse(response.n_bytes, int(pk.n), response.z_hat))
    with pytest.raises(ProtocolError, match="NormResponse"):
        verifier.verify("not a response")
    assert verifier.verify(response)  # the refused inputs changed nothing
    with pytest.raises(ProtocolError, match="already verified"):
        verifier.verify(response)


def test_norm_messages_are_validated(keys, enrolled):
    pk, sk = keys
    cs, _ = enrolled
    challenge = zk.NormVerifier(pk, cs, 1).challenge()
    with pytest.raises(ProtocolError, match="must carry 17 ciphertexts ⟦w_i⟧, got 16"):
        zk.NormChallenge.from_bytes(challenge.to_bytes(), pk, 17)
    with pytest.raises(ProtocolError, match="prime"):
        zk.norm_response(sk, dataclasses.replace(challenge, n_hat=challenge.n_hat + 2), 16)
    with pytest.raises(ProtocolError, match="not in"):
        zk.norm_response(sk, dataclasses.replace(challenge, v=int(pk.n) * 3), 16)
    with pytest.raises(ProtocolError, match="malformed"):
        zk.NormResponse.from_bytes(challenge.to_bytes())
    for bad_y in (-1, int(pk.n), 2.0, True):
        with pytest.raises(ProtocolError, match="non-negative integer below N"):
            zk.NormVerifier(pk, cs, bad_y)


# ---------------------------------------------------------------- real size


@pytest.mark.slow
def test_enrolment_proofs_at_3072_bits():
    pk, sk = generate_paillier_keypair(3072, blum=True)
    u = [secrets.randbelow(2**16 - 1) - (2**15 - 1) for _ in range(8)]
    cs, wit = zk.encrypt_with_witness(sk, u)
    assert zk.verify_modulus(pk, zk.ModulusProof.from_bytes(zk.prove_modulus(sk, context=CTX).to_bytes(), pk),
                             context=CTX)
    assert zk.verify_plaintext_knowledge(pk, cs, zk.prove_plaintext_knowledge(pk, cs, wit, context=CTX), context=CTX)
    assert _norm_run(pk, sk, cs, sum(x * x for x in u))
    assert not _norm_run(pk, sk, cs, sum(x * x for x in u) + 1)


@pytest.mark.parametrize("count, bits", [(1, 5), (3, 128), (40, 128), (20, 600), (7, 0)])
def test_multiexp_with_default_window_and_threads(count, bits):
    mod = gmpy2.mpz(random_prime(200) * random_prime(200)) ** 2
    bases = [gmpy2.mpz(secrets.randbelow(int(mod))) for _ in range(count)]
    exps = [secrets.randbits(bits) if bits else 0 for _ in range(count)]
    exps[0] = 2**bits - 1 if bits else 0  # all-ones top window
    expected = 1
    for b, e in zip(bases, exps):
        expected = expected * gmpy2.powmod(b, e, mod) % mod
    assert multiexp(bases, exps, mod) == expected
    assert multiexp(bases * 20, exps * 20, mod, workers=3) == expected ** 20 % mod


def test_threaded_parties_give_the_same_verdicts(keys, template):
    """workers > 1 only spreads independent exponentiations over threads: honest proofs pass, a wrong norm fails."""
    pk, sk = keys
    cs, wit = zk.encrypt_with_witness(sk, template, workers=2)
    assert [sk.decrypt_signed(c) for c in cs] == template
    assert zk.verify_modulus(pk, zk.prove_modulus(sk, context=CTX, workers=2), context=CTX, workers=2)
    y = sum(x * x for x in template)
    for claim, expected in ((y, True), (y + 1, False)):
        verifier = zk.NormVerifier(pk, cs, claim, workers=2)
        assert verifier.verify(zk.norm_response(sk, verifier.challenge(), len(cs), workers=2)) is expected


def test_bench_gsm_enrol_cli_json(capsys):
    import json

    from privface.cli import main

    assert main(["bench", "gsm-enrol", "--insecure-test-params", "--ell", "8", "--m", "8", "--repeat", "1",
                 "--workers", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["ell"], out["m"], out["paillier_bits"]) == (8, 8, 512)
    for key in ("pien_enc_ms", "pien_ms", "pien_total_ms", "pien_d2sp_bytes", "pien_sp2d_bytes", "within_goal"):
        assert key in out
    assert out["pien_total_ms"] >= out["pien_ms"] > 0
    # D → SP carries N, 8 ciphertexts and 2·128 residues of Π_epk at least
    assert out["pien_d2sp_bytes"] > 64 + 8 * 128 + 256 * 64


@pytest.mark.parametrize("u", [[0] * 5, [-(2**15 - 1)] * 5, [2**15 - 1, -(2**15 - 1), 0, 1, -1], [7]])
def test_edge_templates_prove_and_only_their_norm_verifies(keys, u):
    pk, sk = keys
    cs, wit = zk.encrypt_with_witness(sk, u)
    assert zk.verify_plaintext_knowledge(pk, cs, zk.prove_plaintext_knowledge(pk, cs, wit, context=CTX), context=CTX)
    y = sum(x * x for x in u)
    assert _norm_run(pk, sk, cs, y)
    assert not _norm_run(pk, sk, cs, y + 2**16)
