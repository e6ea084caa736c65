"""Built-in middlewares, one module each."""
