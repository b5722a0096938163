"""Plugin state that outlasts a call: each installation's host.kv store in the hub's database."""
