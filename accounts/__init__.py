"""Accounts, their members and the API keys the platform authenticates with."""
