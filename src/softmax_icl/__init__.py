"""softmax_icl: in-context learning with one attention layer (Collins et al. 2024; Dragutinovic et al. 2025)."""

__version__ = "0.1.0"
