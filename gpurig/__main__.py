"""`python -m gpurig`, the same as the `gpurig` console script."""

from gpurig.cli.entry import main

main()
