"""Tests of the accounts app."""
