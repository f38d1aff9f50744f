"""The weekly rightsizing email: build, render, send, schedule (DESIGN §8)."""
