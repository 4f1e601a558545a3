"""ToyBench: a fourth benchmark defined outside the suite, in one folder (the tests' proof of
the benchmark contract, `utils/core/registry.py`).

Registered by one line: `registry.register(toy_bench.benchmark.BENCHMARK)` in a process, or
`LMMS_VR_BENCHMARKS=toy_bench.benchmark` (with this folder's parent on `PYTHONPATH`) for
`python -m lmms_eval` and `lmms-vr` subprocesses.
"""
