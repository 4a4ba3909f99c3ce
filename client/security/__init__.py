"""What every process shares for security: TLS contexts built from PEM files (tls.py)."""
