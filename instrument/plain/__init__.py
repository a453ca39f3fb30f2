"""The folder that `hindsight collect --untraced` puts first on PYTHONPATH for a Python program
(`instrument.native.plain_env`): its `sitecustomize` marks the program's end and nothing else,
so that the untraced run is the program as `python prog.py` runs it (docs/native.md, "Untraced
runs of a Python program"). This package itself is never imported by those runs."""
