"""The tvmc version: a leaf module, so every layer can name it without importing the package."""

__version__ = "0.1.0"
