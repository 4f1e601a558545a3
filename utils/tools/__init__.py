"""Layer 6, `tools`: the `lmms-vr` command line, doctor, the demo and the sample benchmark."""
