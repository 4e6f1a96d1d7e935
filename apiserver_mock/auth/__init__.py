"""Authentication (x509 client certs) and authorization (one RBAC-like table) for the API server."""
