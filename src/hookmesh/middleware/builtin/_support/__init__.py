"""What several built-in middlewares share: argument checks, atomic writes, confined paths,
front matter, tool output helpers and the retry policy."""
