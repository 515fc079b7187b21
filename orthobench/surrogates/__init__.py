"""Surrogate models: GP construction and fitting, Laplace posteriors over hyperparameters."""
