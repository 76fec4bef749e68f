"""The signals: one file each on one contract (base.py), listed in registry.py."""
