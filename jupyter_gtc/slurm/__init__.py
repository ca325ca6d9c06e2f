"""Slurm itself: rendering its config (pure), parsing its output (pure), running its
commands (through the edge)."""
