"""The one write path: group commit, journal, mover, dedupe keys."""
