-- The Vertex AI CustomJobs the local Vertex endpoint created, each one of our jobs: its
-- resource name (projects/P/locations/L/customJobs/ID), the request as the client sent it,
-- and which job runs it. Removed with the cluster, as its jobs are.
CREATE TABLE vertex_jobs (
    name       TEXT PRIMARY KEY,
    parent     TEXT NOT NULL,
    cluster    TEXT NOT NULL,
    slurm_id   TEXT NOT NULL,
    body       TEXT NOT NULL,
    cancelled  INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX vertex_jobs_by_parent ON vertex_jobs (parent, created_at);
