"""This package's release."""

__version__ = "1.0.0"
