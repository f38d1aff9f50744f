"""JSON API routes."""
