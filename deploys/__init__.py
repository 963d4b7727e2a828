"""pyinfra deploys: `gpu_host.py` composes one module per concern."""
