"""click commands only; nothing imports this wing."""
