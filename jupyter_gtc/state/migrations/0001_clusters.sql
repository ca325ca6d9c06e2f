-- Clusters: one row each. spec and runtime are JSON (never pickles) so any tool can read them.
CREATE TABLE clusters (
    name        TEXT PRIMARY KEY,
    backend     TEXT NOT NULL,
    state       TEXT NOT NULL,          -- CREATING, RUNNING, SCALING, DELETING, ERROR
    spec        TEXT NOT NULL,          -- the validated ClusterSpec, snake_case JSON
    runtime     TEXT NOT NULL DEFAULT '{}',  -- backend-owned: directory, ports, ...
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
