"""Layer 3, `lmms`: the seam with lmms-eval (every assumption about the host lives here).

Imports `core`, `media`, `data` and `judges`; the benchmarks and `results` build on it.
"""
