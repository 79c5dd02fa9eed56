"""Data folder installed as gerules.grammar; importlib.resources reads it."""
