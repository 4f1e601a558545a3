"""Shared code, in layers; a module imports only from its own layer or a lower one
(checked by tests/test_layers.py):

    0 core      benchmark contract and registry, record fields, data roots, intervals, files
    1 media     frame sampling and decoding, subtitles, synthetic videos
    1 data      prepare: download, archives, media index
    2 judges    (top-level package) the judge engine, cache and parsing
    3 lmms      the seam with lmms-eval: plugin, autoload, preflight, model inputs, replay model
    4 results   aggregation, standard errors, score, report
    5 benchmarks (vcr_bench, vrbench, cg_bench)
    6 tools     the CLI, doctor, demo, sample benchmark

Shared code names no benchmark: it finds them through `core.registry`.
"""
