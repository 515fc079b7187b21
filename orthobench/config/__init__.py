"""Configuration vocabulary that needs no model code: names, defaults and their parsers.

Everything here imports neither torch nor BoTorch, so suites can be read and checked without them
(docs/design.md, "Layers and data flow"). :mod:`orthobench.config.names` holds the kernel,
estimator, point-set, sampling and device names and the estimator-name grammar;
:mod:`orthobench.config.params` the constrained parameter types that factory signatures declare
and the registry validates suite values against; :mod:`orthobench.config.schema` the declaration
of a configuration section (strict frozen pydantic dataclasses, their one-line errors, their YAML
forms) that :mod:`orthobench.suite` declares a suite's sections with.
"""
