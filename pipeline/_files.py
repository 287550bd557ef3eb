"""Private, owner-only files written whole: the project's one helper (`schema._files`), re-used here."""

from __future__ import annotations

__all__ = ["append_private_file", "private_dir", "write_private", "write_private_file"]

from schema._files import append_private_file, private_dir, write_private, write_private_file
