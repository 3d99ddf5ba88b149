"""Controlled decoding for the synthetic task: grammar, controls, processors, mixture sampler, generation."""

from semlm.fusion.decoding.generate import (BASELINE_FAIR, FUSION_DEFAULT, PAPER_MIXTURE, DecodingConfig, MixtureAtAdjective,
                                            MixtureSettings, generate, published_decoding, sample_ids)
from semlm.fusion.decoding.grammar import STATES, ClauseGrammar, GrammarMask, ParsedPrefix
from semlm.fusion.decoding.mixture import (NUCLEUS_RULES, AuthorsTopPLogitsWarper, group_uniform_mixture, nucleus,
                                          nucleus_keep)
from semlm.fusion.decoding.processors import ControlSteering, HardControl, LastKRepetitionPenalty

__all__ = [
    "BASELINE_FAIR", "FUSION_DEFAULT", "PAPER_MIXTURE", "STATES", "ClauseGrammar", "ControlSteering",
    "DecodingConfig", "GrammarMask", "HardControl", "LastKRepetitionPenalty", "MixtureSettings", "ParsedPrefix",
    "generate", "group_uniform_mixture", "nucleus", "sample_ids", "published_decoding", "NUCLEUS_RULES",
    "AuthorsTopPLogitsWarper", "nucleus_keep", "MixtureAtAdjective",
]
