"""The user layer across the user's machines, through a git remote of theirs (`rounds`)."""
