"""Adapters that run orthobench's optimizers inside other tools (Optuna: :mod:`.optuna`)."""
