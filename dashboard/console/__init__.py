"""The operator app."""
