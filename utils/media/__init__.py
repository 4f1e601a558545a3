"""Layer 1, `media`: video frames, subtitles and synthetic media (imports `core` only)."""
