"""Paper A, semantic fusion (arXiv 2509.13357): fuzzy features (:mod:`~semlm.fusion.fuzzy`,
:mod:`~semlm.fusion.features`, :mod:`~semlm.fusion.sst2_features`), the baseline and fusion models
(:mod:`~semlm.fusion.backbone`, :mod:`~semlm.fusion.model`), their losses, controlled decoding
(:mod:`~semlm.fusion.decoding`), the leakage audit and the experiments (``*_experiment``).
"""
