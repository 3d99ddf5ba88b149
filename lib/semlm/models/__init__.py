"""Models: the shared backbone, the baseline and the semantic-fusion LM."""

from .backbone import Backbone, BackboneConfig
from .fusion import BaselineLM, FusionLM, LMConfig, LMOutput, build_model

__all__ = ["Backbone", "BackboneConfig", "BaselineLM", "FusionLM", "LMConfig", "LMOutput", "build_model"]
