"""Helpers shared by the test folders (each folder mirrors a subpackage of newrllama)."""
