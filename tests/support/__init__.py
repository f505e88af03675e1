"""Helpers the tests share (servers on loopback, table builders, models, process tools): imported as `support.<module>`.

`tests/` is on `sys.path` (pytest's prepend import mode puts the directory of `tests/conftest.py` there; `bench/` and the
scripts the tests start put it there themselves). No test module imports another test module or `bench/`: what two tests
share lives here.
"""
