"""The audit lists over the API: cancellations, warnings and usage."""
