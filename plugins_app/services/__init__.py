"""Service functions: the hub's logic, called by views, tasks, the admin and commands."""
