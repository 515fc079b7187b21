"""Sphinx configuration of the orthobench documentation site (``make docs``).

The pages are the markdown files of this folder (read by myst-parser) and ``api.rst``, which
autodocs the public API from its Google-style docstrings (napoleon). The HTML goes to
``docs/_build/html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's orthobench, installed or not

project = "orthobench"
author = "orthobench contributors"
copyright = "2026, orthobench contributors"  # noqa: A001 -- the name Sphinx reads

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "estimators/**", "reproduction/**", "images/**"]

# Docstrings: Google style (``Args:``, ``Returns:``, ``Raises:``, ``Example:``) with Sphinx roles.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

# Markdown: ``$...$`` math, ``:::`` fences, and anchors for the "#section" links between pages.
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
# The pages link to source files and CSV tables outside the site (they render on GitHub).
suppress_warnings = ["myst.xref_missing"]

html_theme = "alabaster"
html_title = "orthobench"
