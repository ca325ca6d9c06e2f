-- The Vertex AI jobs the local Vertex endpoint created: CustomJobs, each one of our jobs, and
-- HyperparameterTuningJobs, each one of our studies. Its resource name
-- (projects/P/locations/L/customJobs/ID), the request as the client sent it, and which job or
-- study runs it (ref: the Slurm id, or the study's name). Removed with the cluster.
CREATE TABLE vertex_jobs (
    name       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,      -- customJobs or hyperparameterTuningJobs, as in the name
    parent     TEXT NOT NULL,
    cluster    TEXT NOT NULL,
    ref        TEXT NOT NULL,
    body       TEXT NOT NULL,
    cancelled  INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX vertex_jobs_by_parent ON vertex_jobs (parent, kind, created_at);
