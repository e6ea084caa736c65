"""hookmesh: an agent runtime whose every customisation is a middleware, local or remote."""

__version__ = "0.1.0"
