"""Corpora, vocabularies and dataset paths."""
