"""`eval --protocol im2020` as a long job: checkpoint/resume, refused foreign checkpoints, secure-comparison mode."""
import json
import os
import stat

import numpy as np
import pytest

from privface.errors import CheckpointError
from privface.eval import im2020_attacks as attacks
from privface.eval import im2020_eval
from privface.eval.run import MISSING
from privface.protocols.im2020 import Im2020Params

TOY = Im2020Params.toy()


@pytest.fixture(scope="module")
def pairs():
    """5 synthetic templates (two near-copies, so some pairs are genuine), one without a face; 8 pairs."""
    rng = np.random.default_rng(3)
    q = np.stack([attacks.face_like_template(TOY, rng) for _ in range(5)])
    q[1] = np.clip(q[0] + rng.integers(-3, 4, q.shape[1]), -128, 128)
    q[3] = np.clip(q[2] + rng.integers(-3, 4, q.shape[1]), -128, 128)
    found = np.array([True, True, True, True, False])
    i = np.array([0, 0, 0, 1, 1, 2, 2, 3])
    j = np.array([1, 2, 4, 2, 3, 3, 4, 4])
    plain = ((q[i] - q[j]) ** 2).sum(axis=1).astype(np.float64)
    return q, found, i, j, plain


def scores(pairs, tmp_path=None, name="ck.jsonl", params=TOY, **kw):
    q, found, i, j, plain = pairs
    checkpoint = None if tmp_path is None else tmp_path / name
    return im2020_eval.protocol_scores(q, found, i, j, plain, MISSING, params=params, workers=1,
                                       checkpoint=checkpoint, chunk_pairs=2, **kw)


def test_basic_mode_scores_equal_plaintext(pairs):
    s, extra = scores(pairs)
    plain, run = pairs[4], pairs[1][pairs[2]] & pairs[1][pairs[3]]
    assert np.array_equal(s[run], plain[run]) and (s[~run] == MISSING).all()
    assert extra["pairs_run"] == 5 and extra["pairs_resumed"] == 0
    assert extra["mismatches"] == 0 and extra["score_mismatches"] == 0 and 0 < extra["accepted"] < 5
    assert extra["checkpoint"] is None and extra["scores_from"] == "protocol"


def test_kill_and_resume_gives_the_single_run_result(pairs, tmp_path):
    single, single_extra = scores(pairs, tmp_path, "single.jsonl")
    path = tmp_path / "single.jsonl"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 1 + 3 + 1  # header, 3 chunks of ≤ 2 pairs, final newline
    # a kill after the first chunk, in the middle of writing the second
    (tmp_path / "killed.jsonl").write_bytes(b"\n".join(lines[:2]) + b"\n" + lines[2][:10])
    resumed, extra = scores(pairs, tmp_path, "killed.jsonl")
    assert extra["pairs_resumed"] == 2 and extra["pairs_run"] == 5
    assert np.array_equal(resumed, single) and extra["mismatches"] == single_extra["mismatches"] == 0
    assert extra["accepted"] == single_extra["accepted"]
    done = [json.loads(x) for x in (tmp_path / "killed.jsonl").read_bytes().splitlines()[1:]]
    assert sorted(p for d in done for p in d["pairs"]) == [0, 1, 3, 4, 5]  # every pair once, pair 2 and 6 lack a face
    again, extra = scores(pairs, tmp_path, "killed.jsonl")  # complete: nothing left to run
    assert extra["pairs_resumed"] == 5 and np.array_equal(again, single)


def test_a_checkpoint_of_other_settings_is_refused_and_left_alone(pairs, tmp_path):
    scores(pairs, tmp_path)
    before = (tmp_path / "ck.jsonl").read_bytes()
    with pytest.raises(CheckpointError, match="other settings.*tau"):
        scores(pairs, tmp_path, params=Im2020Params.toy(tau=1000))
    q, found, i, j, plain = pairs
    with pytest.raises(CheckpointError, match="inputs_sha256"):
        im2020_eval.protocol_scores(q + 1, found, i, j, plain, MISSING, params=TOY, workers=1,
                                    checkpoint=tmp_path / "ck.jsonl")
    assert (tmp_path / "ck.jsonl").read_bytes() == before
    (tmp_path / "junk.jsonl").write_text("hello\n")
    with pytest.raises(CheckpointError, match="not a privface evaluation checkpoint"):
        scores(pairs, tmp_path, "junk.jsonl")


def test_secure_comparison_decisions_equal_basic_decisions(pairs, tmp_path):
    q, found, i, j, plain = pairs
    seccmp = Im2020Params.toy(mode="secure-comparison", compare_bits=64)
    run = found[i] & found[j]
    basic_scores, basic = scores(pairs)
    s, extra = scores(pairs, tmp_path, params=seccmp)
    assert extra["mode"] == "secure-comparison" and extra["score_mismatches"] is None
    assert extra["scores_from"].startswith("plaintext") and np.array_equal(s[run], plain[run])
    assert extra["mismatches"] == 0 and extra["accepted"] == basic["accepted"]
    done = [json.loads(x) for x in (tmp_path / "ck.jsonl").read_bytes().splitlines()[1:]]
    assert all(d["scores"] is None for d in done)  # the server learns no score, the checkpoint holds none
    decisions = {p: dec for d in done for p, dec in zip(d["pairs"], d["decisions"])}
    assert decisions == {p: bool(basic_scores[p] < TOY.tau) for p in np.flatnonzero(run)}


def test_process_pool_records_every_chunk_like_one_process(pairs, tmp_path):
    q, found, i, j, plain = pairs
    one, _ = scores(pairs)
    pooled, extra = im2020_eval.protocol_scores(q, found, i, j, plain, MISSING, params=TOY, workers=2,
                                                checkpoint=tmp_path / "pool.jsonl", chunk_pairs=2)
    assert np.array_equal(pooled, one) and extra["protocol_workers"] == 2 and extra["mismatches"] == 0
    assert len((tmp_path / "pool.jsonl").read_bytes().splitlines()) == 1 + 3
