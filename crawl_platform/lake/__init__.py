"""Operations on a lake as a whole: backups and restores (backup), the import of an old single-file store (migrate)."""
