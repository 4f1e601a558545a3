"""Layer 6, `tools`: the `lmms-vr` command line, the demo, the sample benchmark and the upstream export."""
