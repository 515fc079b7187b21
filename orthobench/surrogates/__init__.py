"""Surrogate models: GPs, their theta algebra and fits, Laplace posteriors, theta-sampled GPs."""
