"""`privface bench cluster` at toy size (issue 38 §3): a 3-node Ray test cluster, 2 resident shards (hers: the
local server's; cryptomask: the CS's) over a PostgreSQL gallery, a node killed during a minute of identifications
and enrolments — the run must report every probe identical to the in-process server, 0 wrong answers, 0 lost
identities and a correct answer within 60 s."""
import os

import pytest

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


@pytest.mark.slow
@pytest.mark.skipif(not PG_URL, reason="needs PostgreSQL (.ci/with-postgres sets PRIVFACE_TEST_PG_URL)")
@pytest.mark.parametrize("scheme", ["hers", "cryptomask"])
def test_node_loss_run_reports_no_wrong_answer_and_no_lost_identity(monkeypatch, scheme):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from privface.bench.cluster import bench_cluster

    row = bench_cluster(scheme, 4096, store=PG_URL, probes=20, duration=45, kill_at=10, recheck=20,
                        insecure_test_params=True)
    assert row["probes_identical"] and row["recheck_identical"], row
    assert row["wrong_answers"] == 0 and row["lost_identities"] == 0 and row["other_errors"] == 0, row
    assert row["enrolments"] >= 3 and row["identifications"] >= 10, row
    assert row["recovery_s"] is not None and row["recovery_s"] <= 60, row
