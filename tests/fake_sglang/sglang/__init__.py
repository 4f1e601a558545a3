"""Test stand-in for sglang (see ../README.md)."""
