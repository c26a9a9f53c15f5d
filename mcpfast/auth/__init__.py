"""OAuth 2.1 resource server for the HTTP transport (RFC 9728 metadata, JWT bearer tokens)."""
