"""`hub`: the hub's command-line tool for plugin authors and operators (talks to a hub over its REST API)."""
