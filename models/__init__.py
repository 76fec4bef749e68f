"""The model registry (registry.toml), shipped inside the package as mmdedup.registry.

Downloaded or exported weights go to models/cache/ (git-ignored) or $MMDEDUP_MODEL_CACHE.
"""
