"""Models that take a ``norm_layer`` factory, so any normaliser drops in.

Part I: ``MLP`` (with ``mlp_for(normaliser, ...)``) and ``CNN`` (with ``cnn_for``). Part II: ``ViTLite``,
``SequenceTransformer`` and ``TabularTransformer``, built from the blocks in
:mod:`normlab.models.blocks`, each with named configs.
"""

from __future__ import annotations

from .blocks import (
    Attention,
    Block,
    DropPath,
    Encoder,
    EncoderConfig,
    FeedForward,
    LayerScale,
    apply_norm,
)
from .cnn import CNN, CNNConfig, cnn_for
from .mlp import MLP, MLPConfig, mlp_for
from .sequence import (
    SEQUENCE_CONFIGS,
    SequenceConfig,
    SequenceTransformer,
    sequence_config,
)
from .tabular import (
    TABULAR_CONFIGS,
    FeatureTokenizer,
    TabularConfig,
    TabularTransformer,
    tabular_config,
)
from .vit import VIT_CONFIGS, ViTConfig, ViTLite, vit_config

__all__ = [
    "MLP",
    "MLPConfig",
    "mlp_for",
    "CNN",
    "CNNConfig",
    "cnn_for",
    "Attention",
    "Block",
    "DropPath",
    "Encoder",
    "EncoderConfig",
    "FeedForward",
    "LayerScale",
    "apply_norm",
    "ViTLite",
    "ViTConfig",
    "VIT_CONFIGS",
    "vit_config",
    "SequenceTransformer",
    "SequenceConfig",
    "SEQUENCE_CONFIGS",
    "sequence_config",
    "TabularTransformer",
    "TabularConfig",
    "TABULAR_CONFIGS",
    "FeatureTokenizer",
    "tabular_config",
]
