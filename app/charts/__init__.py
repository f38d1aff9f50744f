"""Pure figure builders from frames, shared by the dashboard and the weekly email."""
