"""What every part may use: the error hierarchy, the shared pydantic types, the settings, the
secret filter, the JSON stores of the caches, and the shipped data files (resources).

May import: nothing of Autopilot's own.
"""
