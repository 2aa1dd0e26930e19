"""A multi-node Ray test cluster in its own process (``ray.cluster_utils.Cluster``: several raylets on this machine,
one CPU each), driven over stdin/stdout with JSON lines, so that the process that runs the test or the bench
(``privface bench cluster``, tests/scale) never calls Ray.

    python -m privface.bench.ray_cluster NODES
    → {"address": "127.0.0.1:PORT", "nodes": [node ids]}
    ← "kill"   kill (ungracefully) a non-head node that holds a bundle of a placement group
    → {"killed": node id, "bundles": {placement group: {bundle: node id}}}
    ← "quit"   (or EOF) stop every node

Run with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in the environment so that every Ray port binds 127.0.0.1.
"""
from __future__ import annotations

import json
import sys

import ray
from ray.cluster_utils import Cluster


def _say(obj) -> None:
    print(json.dumps(obj), flush=True)


def _bundles() -> dict:
    return {pg: dict(t.get("bundles_to_node_id", {})) for pg, t in ray.util.placement_group_table().items()
            if t.get("state") != "REMOVED"}


def main(nodes: int) -> None:
    # worker_niceness 0: the shards run at this process's priority (the test runs it under `nice`)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "_system_config": {"worker_niceness": 0}})
    workers = [cluster.add_node(num_cpus=1) for _ in range(nodes - 1)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    _say({"address": cluster.address, "nodes": [n["NodeID"] for n in ray.nodes() if n["Alive"]]})
    try:
        for line in sys.stdin:
            if line.strip() == "kill":
                bundles = _bundles()
                held = {node for b in bundles.values() for node in b.values()}
                victim = next(w for w in workers if w.node_id in held)
                cluster.remove_node(victim, allow_graceful=False)
                workers.remove(victim)
                _say({"killed": victim.node_id, "bundles": bundles})
            elif line.strip() == "quit":
                break
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]))
