"""pyinfra facts gpurig reads from hosts (one module per concern)."""
