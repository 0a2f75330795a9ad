"""Prompt templates (string.Template text files), one set per candidate language."""
