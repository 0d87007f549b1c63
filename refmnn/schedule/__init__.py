"""Pre-inference passes: pure functions over immutable graphs."""
