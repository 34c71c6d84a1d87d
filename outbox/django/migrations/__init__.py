"""The Django app's migrations: unmanaged models only, no table of Outbox's touched."""
