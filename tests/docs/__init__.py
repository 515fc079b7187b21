"""The documentation runs: the tutorials' and README's Python blocks, and the Sphinx site."""
