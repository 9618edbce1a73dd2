"""Coordinators: the group coordinator (and later the transaction coordinator)."""
