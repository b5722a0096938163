"""`hub`: the hub's command-line tool for plugin authors and operators (talks to a hub over its REST API)."""

# The CLI's own version (`hub --version`); it moves with the REST API it speaks (SPECTACULAR_SETTINGS' VERSION).
__version__ = "1.0.0"
