"""The fast engine: the whole decoder loop and search step of nmt/decoder.py, replaced for speed (same parameters,
same values within fp32 rounding; tests/test_engine.py holds the two to that). nmt/build.py plugs it in."""
