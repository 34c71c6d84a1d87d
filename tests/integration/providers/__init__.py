"""Local stand-ins for the HTTP providers, each on 127.0.0.1, started by a test."""
