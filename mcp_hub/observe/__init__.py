"""What the hub reports about itself: the audit log and OpenTelemetry."""
