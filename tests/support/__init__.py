"""Helpers shared by the tests (not product code)."""
