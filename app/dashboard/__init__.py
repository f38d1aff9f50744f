"""The Dash app on the FastAPI server: shell, pages, filter bar and load-time speedups."""
