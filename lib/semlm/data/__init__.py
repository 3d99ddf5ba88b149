"""Corpora, vocabularies and dataset paths.

``python -m semlm.data fetch`` (``make data``) downloads the real datasets into the layout the
loaders read and checks them against the SHA-256 values in ``semlm/data/checksums.sha256``;
``python -m semlm.data verify`` checks them offline (:mod:`semlm.data.fetch`).
"""
