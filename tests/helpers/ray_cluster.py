"""The multi-node Ray test cluster of ``privface.bench.ray_cluster`` (kept under this name for the tests)."""
from privface.bench.ray_cluster import main

if __name__ == "__main__":
    import sys

    main(int(sys.argv[1]))
