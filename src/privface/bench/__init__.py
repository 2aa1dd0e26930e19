"""Benchmarks: timings of the faces, crypto and protocol layers (`privface bench`); reads eval and the layers below."""
