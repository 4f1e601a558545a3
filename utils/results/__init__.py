"""Layer 4, `results`: scoring records, standard errors, `lmms-vr score` and `lmms-vr report`."""
