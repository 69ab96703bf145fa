"""Models that take a ``norm_layer`` factory, so any normaliser drops in."""
from __future__ import annotations
from .mlp import MLP, MLPConfig, PART1_NORMALISERS, mlp_for
from .blocks import Attention, Block, DropPath, Encoder, EncoderConfig, FeedForward, LayerScale, apply_norm
from .vit import VIT_CONFIGS, ViTConfig, ViTLite, vit_config
from .sequence import SEQUENCE_CONFIGS, SequenceConfig, SequenceTransformer, sequence_config
from .tabular import TABULAR_CONFIGS, FeatureTokenizer, TabularConfig, TabularTransformer, tabular_config
