"""Test helpers: oracles and reference implementations imported by several tests (not collected)."""
