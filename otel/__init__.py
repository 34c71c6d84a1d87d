"""Telemetry: OpenTelemetry tracing and metrics set-up for Outbox processes."""
