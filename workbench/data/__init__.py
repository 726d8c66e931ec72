"""Importers, exporters and input validation."""
