"""``python -m hookmesh.services.retrieval``: run the retrieval service."""

from hookmesh.services.retrieval._main import main

if __name__ == "__main__":
    raise SystemExit(main())
