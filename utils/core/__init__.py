"""Layer 0, `core`: what every other part of the suite stands on.

The benchmark contract and registry, data roots, interval arithmetic and atomic files.
Imports nothing else of the suite.
"""
