"""The running server: runtime, error answers, dependency aliases, HTTP guard, tuning, logs."""
