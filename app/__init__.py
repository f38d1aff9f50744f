"""tokenshape: the real shape of LLM serving traffic, and engines rebuilt to fit it."""

__version__ = "0.1.0"
