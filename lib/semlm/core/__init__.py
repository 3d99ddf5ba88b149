"""What every chapter shares: the runner and its cache (:mod:`~semlm.core.runs`), the one trainer
(:mod:`~semlm.core.train`), metrics, typed records and intervals, the causality probe.

Torch-free on import: submodules are imported explicitly.
"""
