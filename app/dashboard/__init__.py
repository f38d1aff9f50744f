"""The Dash app on the FastAPI server: shell, pages, figures."""
