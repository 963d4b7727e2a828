"""`python -m gpurig`, the same as the `gpurig` console script."""

from gpurig.entry import main

main()
