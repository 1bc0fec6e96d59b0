"""Fixture cases built from field values (the encoder writes the golden bytes)."""
