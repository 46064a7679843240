"""Reporters: a Diagnosis -> text, JSON, Markdown or HTML. The library never imports this package."""
