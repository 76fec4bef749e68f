"""Alembic migrations, shipped inside the package as mmdedup.migrations."""
