"""Controlled decoding for the synthetic task: grammar, controls, processors, mixture sampler, generation."""

from .controls import Controls
from .generate import (BASELINE_FAIR, FUSION_DEFAULT, PAPER_MIXTURE, DecodingConfig, MixtureSettings, generate,
                       published_decoding)
from .grammar import STATES, ClauseGrammar, GrammarMask, ParsedPrefix
from .mixture import NUCLEUS_RULES, AuthorsTopPLogitsWarper, group_uniform_mixture, nucleus, nucleus_keep, sample_mixture
from .processors import ControlSteering, HardControl, LastKRepetitionPenalty

__all__ = [
    "BASELINE_FAIR", "FUSION_DEFAULT", "PAPER_MIXTURE", "STATES", "ClauseGrammar", "ControlSteering", "Controls",
    "DecodingConfig", "GrammarMask", "HardControl", "LastKRepetitionPenalty", "MixtureSettings", "ParsedPrefix",
    "generate", "group_uniform_mixture", "nucleus", "sample_mixture", "published_decoding", "NUCLEUS_RULES",
    "AuthorsTopPLogitsWarper", "nucleus_keep",
]
