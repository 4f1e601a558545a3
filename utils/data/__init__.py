"""Layer 1, `data`: fetching, extracting and indexing a benchmark's data (`lmms-vr prepare`); imports `core` only."""
