"""A rental from an SSH address to converged and verified: onboarding, acceptance, reach and pin."""
