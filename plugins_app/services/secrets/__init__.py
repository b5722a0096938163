"""Account secrets: stored encrypted, bound to hosts, injected at egress, redacted from every output."""
