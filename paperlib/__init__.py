"""paperlib: reproducibility artifact for "Rethinking the Security of DP-SGD" (Wang et al. 2026)."""

__version__ = "0.1.0"
