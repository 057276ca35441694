"""What a run keeps: the archive (local or S3, immutable objects, a manifest) and git (worktrees,
new branches built without touching the user's checkout, through one hardened git helper).

May import: tasks.core.
"""
