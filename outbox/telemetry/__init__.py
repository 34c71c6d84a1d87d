"""Telemetry set-up for Outbox processes: tracing (OpenTelemetry) and metrics."""
