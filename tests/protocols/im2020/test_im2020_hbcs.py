"""Seed 000 App. B/E: the HBCS simulator's transcripts equal the real protocol's as multisets (toy sizes)."""

import pytest

from privface.crypto import catalano_fiore as cf
from privface.crypto.joye_libert import JoyeLibertPrivateKey
from privface.eval import im2020_hbcs as hbcs
from privface.protocols.im2020 import Randomizers


@pytest.fixture(scope="module")
def setup():
    base = JoyeLibertPrivateKey.from_primes(hbcs.HBCS_P, hbcs.HBCS_Q, hbcs.HBCS_K, insecure_test_params=True)
    pk = hbcs._ServerCoinsKey(base.public_key, 5)
    sk = JoyeLibertPrivateKey(pk, hbcs.HBCS_P, hbcs.HBCS_Q)
    gamma, b = 11, 6
    C = cf.Level1(gamma - b, pk.ciphertext(pk.encrypt_with(b, 2)))
    return sk, pk, C, gamma


def test_experiment_multisets_equal_and_negative_controls_differ():
    out = hbcs.hbcs_experiment(randomizer_pairs=3)
    assert out["modulus"] == 527 and out["modulus_bits"] == 10 and out["message_bits"] == 4
    assert out["coins_per_world"] == 16 * 480  # |M| · |Z*_527|
    assert out["transcripts"] == 3 * 16 * 480
    assert out["distinct"]["real"] == out["distinct"]["simulated"] == 3 * 16 * 15  # |M| · |{x^16}|
    assert out["equal"] is True
    assert out["negative_controls"] == {"fixed_a_prime": {"equal": False}, "nonzero_sed_as_zero": {"equal": False}}


def test_real_transcripts_decrypt_to_r1_and_accept(setup):
    sk, pk, C, gamma = setup
    rnd = Randomizers(3, 9)
    real = hbcs.transcripts(sk, C, hbcs.real_coins(pk, gamma), rnd, simulated=False)
    assert sum(real.values()) == 16 * 480
    assert {(t[4], t[5]) for t in real} == {(9, 1)}  # s = 0: s* = r1, r = 1 by real decryption
    sim = hbcs.transcripts(sk, C, hbcs.simulated_coins(pk, C), rnd, simulated=True)
    assert real == sim
    off = hbcs.transcripts(sk, C, hbcs.real_coins(pk, gamma + 1), rnd, simulated=False)
    assert {(t[4], t[5]) for t in off} == {((3 * 3 + 9) % 16, 0)}  # s = 1: s* = r0² + r1, rejected


def test_simulator_with_fixed_a_prime_has_the_right_size_but_wrong_distribution(setup):
    sk, pk, C, _ = setup
    good, bad = hbcs.simulated_coins(pk, C), hbcs.simulated_coins(pk, C, [0] * 16)
    assert sum(good.values()) == sum(bad.values()) and good != bad
    assert {c[0] for c in bad} == {0}


def test_transcript_is_a_function_of_c_prime_under_fixed_server_coins(setup):
    sk, pk, C, gamma = setup
    c2 = next(iter(hbcs.real_coins(pk, gamma)))
    rnd = Randomizers(5, 1)
    assert hbcs.transcript(sk, C, c2, rnd, simulated=False) == hbcs.transcript(sk, C, c2, rnd, simulated=False)
    other = hbcs._ServerCoinsKey(pk, 7)  # other server coins give another α* for the same C′
    C_other = cf.Level1(C.a, other.ciphertext(int(C.beta.value)))
    sk_other = JoyeLibertPrivateKey(other, hbcs.HBCS_P, hbcs.HBCS_Q)
    assert hbcs.transcript(sk_other, C_other, c2, rnd, simulated=False)[2] != \
        hbcs.transcript(sk, C, c2, rnd, simulated=False)[2]


def test_bad_pair_count_is_refused():
    with pytest.raises(ValueError):
        hbcs.hbcs_experiment(randomizer_pairs=0)
