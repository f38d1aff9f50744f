"""Who is asking: logins, session cookies, CSRF and the gate in front of every route."""
