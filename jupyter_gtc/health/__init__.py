"""Node health: checks that look at one node and say pass, warn, fail or n/a with their
evidence (``checks.py``), and the program that runs them on a node within a time budget
(``python -m jupyter_gtc.health.node``), as Slurm's HealthCheckProgram, a prolog or a
notebook's ``%gtc_health`` would (issue 14)."""
