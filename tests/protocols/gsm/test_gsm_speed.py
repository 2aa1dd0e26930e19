"""The terminal's fast paths (precomputed slot bases for a reused m1, one inner product for both Π3
ciphertexts) and the device's parallel CRT decryption give exactly the results of the direct computation."""
import secrets

import pytest

from privface.crypto import packing
from privface.crypto.paillier import generate_paillier_keypair
from privface.errors import CryptoError
from privface.protocols.gsm import GsmParams
from privface.protocols.gsm.parties import packed_inner_product, slot_bases, window_tables

P = GsmParams.toy(ell=20, m=8)


@pytest.fixture(scope="module")
def keys():
    return generate_paillier_keypair(P.paillier_bits, insecure_test_params=True)


@pytest.mark.parametrize("variant", ["pi1", "pi3"])
def test_slot_bases_product_equals_horner_and_plaintext(keys, variant):
    pk, sk = keys
    pp = P.packing(pk.bits, variant)
    u = [secrets.randbelow(2**P.m) for _ in range(P.ell)]
    w = [secrets.randbelow(2**P.m) for _ in range(P.ell)]
    w[3] = 0  # a zero exponent is skipped
    cts = [int(sk.encrypt(e).value) for e in packing.encode1_vector(pp, u)]
    horner = packed_inner_product(pk, window_tables(pk, cts), w, pp)
    fast = packed_inner_product(pk, window_tables(pk, slot_bases(pk, cts, pp, P.ell)), w, pp, per_slot=True)
    serial = packed_inner_product(pk, window_tables(pk, slot_bases(pk, cts, pp, P.ell)), w, pp, per_slot=True,
                                  workers=1)
    assert fast == horner == serial
    plain = sum(packing.encode1(pp, u[j:j + pp.n]) * packing.encode1(pp, w[j:j + pp.n])
                for j in range(0, P.ell, pp.n))
    assert sk.decrypt(pk.ciphertext(fast)) == plain % pk.n


def test_decrypt_many_matches_decrypt_and_refuses_foreign_ciphertexts(keys):
    pk, sk = keys
    ms = [secrets.randbelow(int(pk.n)) for _ in range(5)]
    cs = [pk.encrypt(m) for m in ms]
    assert sk.decrypt_many(cs) == [sk.decrypt(c) for c in cs] == ms
    assert sk.decrypt_many(cs, workers=1) == ms
    other, _ = generate_paillier_keypair(P.paillier_bits, insecure_test_params=True)
    with pytest.raises(CryptoError):
        sk.decrypt_many([cs[0], other.encrypt(1)])


def test_owner_short_exponent_r_rn_pairs_match(keys):
    from privface.crypto.paillier import OwnerShortExponentRn

    pk, sk = keys
    src = OwnerShortExponentRn(sk)
    pairs = [src.random_r_rn() for _ in range(3)]
    assert len({r for r, _ in pairs}) == 3
    for r, rn in pairs:
        assert 0 < r < pk.n and rn == pow(int(r), int(pk.n), int(pk.nsquare))
    with pytest.raises(Exception, match="PaillierPrivateKey"):
        OwnerShortExponentRn(pk)
    phi = (sk.p - 1) * (sk.q - 1)
    assert all(pow(int(rn), int(phi), int(pk.nsquare)) == 1 for _, rn in pairs)  # N-th residues


def test_encrypt_with_witness_round_trip_and_homomorphism(keys):
    from privface.protocols.gsm import zk

    pk, sk = keys
    vals = [5, -7, 0, 2**15 - 1]
    cts, wit = zk.encrypt_with_witness(sk, vals)
    assert [sk.decrypt_signed(c) for c in cts] == vals
    assert sk.decrypt_signed(cts[0] + cts[1]) == -2 and sk.decrypt_signed(3 * cts[3]) == 3 * (2**15 - 1)
    for c, (x, r) in zip(cts, wit):  # the witness opens the ciphertext: c = (1 + xN)·r^N
        assert c.value == (1 + x * pk.n) * pow(int(r), int(pk.n), int(pk.nsquare)) % pk.nsquare
    proof = zk.prove_plaintext_knowledge(pk, cts, wit)
    assert zk.verify_plaintext_knowledge(pk, cts, proof)
    assert not zk.verify_plaintext_knowledge(pk, [cts[1], cts[0], *cts[2:]], proof)


def test_pi3_circuit_with_a_short_factor_decides_as_the_full_one():
    from privface.crypto.compare import gsm_pi3_circuit
    from privface.crypto.garble import from_bits, to_bits

    k, a_bits = 20, 8
    short, full = gsm_pi3_circuit(k, True, a_bits), gsm_pi3_circuit(k, True)
    assert short.and_count < full.and_count and short.digest() != full.digest()
    for _ in range(20):
        pad, a, b, T, ip_max = (secrets.randbelow(2**k), 1 + secrets.randbelow(2**a_bits - 1),
                                secrets.randbelow(2**k), secrets.randbelow(2**k), secrets.randbelow(2**k))
        ip = secrets.randbelow(2**k)
        X, Y = (ip + pad) % 2**k, (a * ip + b + secrets.randbelow(2)) % 2**k
        ev = to_bits(X, k) + to_bits(Y, k)
        tail = to_bits(b, k) + to_bits(T, k) + to_bits(ip_max, k)
        got = short.evaluate(to_bits(pad, k) + to_bits(a, a_bits) + tail, ev)
        assert got == full.evaluate(to_bits(pad, k) + to_bits(a, k) + tail, ev)
        assert got == ((a * ip + b) % 2**k == Y, T <= ip, ip <= ip_max)
    assert from_bits(to_bits(5, 4)) == 5


def test_generator_half_gates_garble_evaluate_and_round_trip():
    """a ∧ b and a·x with a the garbler's: GAND tables (16 B each) evaluate to the plaintext result for every
    input, survive the wire format, and a truncated or missing half-gate table is refused."""
    from privface.crypto.garble import CircuitBuilder, GarbledCircuit, evaluate, from_bits, garble, to_bits

    b = CircuitBuilder()
    x, a = b.evaluator_input(6), b.garbler_input(3)
    b.output(b.and_known(a[0], x[0]), *b.mul(x, a, y_known=True))
    c = b.build()
    assert c.half_count > 0
    with pytest.raises(Exception, match="garbler input wire"):
        b.and_known(x[1], x[2])
    with pytest.raises(Exception, match="input bits"):
        garble(c)
    for _ in range(12):
        av, xv = secrets.randbelow(8), secrets.randbelow(64)
        gbits, ebits = to_bits(av, 3), to_bits(xv, 6)
        gc, g = garble(c, gbits)
        gc = GarbledCircuit.from_bytes(gc.to_bytes())
        assert len(gc.to_bytes()) == 52 + 32 * c.and_count + 4 + 16 * c.half_count
        out = g.decode(evaluate(c, gc, g.garbler_labels(gbits),
                                [g.label(w, v) for w, v in zip(c.evaluator_inputs, ebits)]))
        assert out == c.evaluate(gbits, ebits)
        assert out[0] == (av & xv & 1) and from_bits(list(out[1:])) == av * xv % 64
    data = gc.to_bytes()
    for bad in (data[:-1], data + b"\0"):
        with pytest.raises(CryptoError):
            GarbledCircuit.from_bytes(bad)
    with pytest.raises(Exception, match="half-gate"):
        evaluate(c, GarbledCircuit(gc.digest, gc.key, gc.tables, gc.half_tables[:-1]), g.garbler_labels(gbits),
                 [g.label(w, v) for w, v in zip(c.evaluator_inputs, ebits)])


def test_pi3_circuit_with_narrow_x_decides_fig6():
    """x_bits < k: X, pad, T, ip_max and IP are x_bits wide, a·IP + b and Y stay k bits (GsmParams.x_bits)."""
    from privface.crypto.compare import gsm_pi3_circuit
    from privface.crypto.garble import to_bits

    xb, a_bits = 12, 8
    k = xb + a_bits
    narrow, wide = gsm_pi3_circuit(k, True, a_bits, xb), gsm_pi3_circuit(k, True, a_bits)
    assert narrow.and_count < wide.and_count and len(narrow.evaluator_inputs) == xb + k
    for trial in range(200):
        pad, a, b = secrets.randbelow(2**k), 1 + secrets.randbelow(2**a_bits - 1), secrets.randbelow(2**k)
        T, ip_max, ip = secrets.randbelow(2**xb), secrets.randbelow(2**xb), secrets.randbelow(2**xb)
        X, Y = (ip + pad) % 2**xb, (a * ip + b + (trial % 3 == 0)) % 2**k
        got = narrow.evaluate(to_bits(pad % 2**xb, xb) + to_bits(a, a_bits) + to_bits(b, k) + to_bits(T, xb)
                              + to_bits(ip_max, xb), to_bits(X, xb) + to_bits(Y, k))
        assert got == ((a * ip + b) % 2**k == Y, T <= ip, ip <= ip_max)
