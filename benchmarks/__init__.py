"""Scripts that print numbers (not tests)."""
