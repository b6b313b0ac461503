"""The links every call passes through on its way to a server: audit, then policy."""
