"""Helpers shared by the test tiers: servers, databases, records, the CLI, browsers, corpora.

Test modules import from here (never from a conftest.py); conftest.py files only define fixtures.
"""
