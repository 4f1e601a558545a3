"""ToyBench: a fourth benchmark defined outside the suite, in one folder (the tests' proof of
the benchmark contract, `utils/core/registry.py`).

Registered by one line: `LMMS_VR_BENCHMARKS=toy_bench.benchmark` (with this folder's parent on
`PYTHONPATH`), for this process and for `python -m lmms_eval` and `lmms-vr` subprocesses.
"""
