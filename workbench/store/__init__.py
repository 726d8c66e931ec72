"""SQLite access: opening a database, applying migrations, typed queries."""

from workbench.store.db import Store, default_db_path, open_store

__all__ = ["Store", "default_db_path", "open_store"]
