"""Data folder installed as gerules.rules; importlib.resources reads it."""
