"""The weekly rightsizing email: build, render and send it (app.jobs.schedule sends it on time)."""
