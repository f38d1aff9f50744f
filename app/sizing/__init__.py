"""Engine sizing (DESIGN §7): catalog, memory math, bounds, recommendations. Pure: no I/O."""
