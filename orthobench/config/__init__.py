"""Configuration vocabulary that needs no model code: names, defaults and their parsers.

Everything here imports neither torch nor BoTorch (the registry does, when it checks a suite's
task and optimizer names: docs/design.md, "Layers and data flow"). :mod:`orthobench.config.names`
holds the kernel,
estimator, point-set, sampling and device names and the estimator-name grammar;
:mod:`orthobench.config.params` the constrained parameter types that factory signatures declare
and the registry validates suite values against; :mod:`orthobench.config.schema` the declaration
of a configuration section (strict frozen pydantic dataclasses, their one-line errors, their YAML
forms) that :mod:`orthobench.suite` declares a suite's sections with;
:mod:`orthobench.config.strict_yaml` the one YAML loader of suites and thresholds files; and
:mod:`orthobench.config.beside` the check that a suite's modules beside it are the ones imported.
"""
