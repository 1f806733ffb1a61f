"""The package's version, on the ground floor: every module may read it without importing the package root."""

__version__ = "0.1.0"
