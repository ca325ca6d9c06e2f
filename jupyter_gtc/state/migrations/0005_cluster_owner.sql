-- Which process is creating, scaling or deleting a cluster ({"pid", "host", "started",
-- "action"}), so another process can tell an operation that runs from one whose process
-- died (a Jupyter server restarted mid-scale); then {"interrupted": action, "pid"}.
-- NULL while nothing is under way.
ALTER TABLE clusters ADD COLUMN owner TEXT;
