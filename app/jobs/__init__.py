"""Background jobs with one lifecycle (start, stop, entered from the lifespan) and cron parsing."""
