-- The model registry (state/models.py): models, their versions numbered from 1, aliases (one
-- version per alias within a model, as Vertex AI's Model Registry), and an append-only history
-- of every change with its time and user. JSON columns, never pickles.
CREATE TABLE models (
    name          TEXT PRIMARY KEY,
    description   TEXT NOT NULL DEFAULT '',
    labels        TEXT NOT NULL DEFAULT '{}',   -- {key: value}, Vertex's label rules (JSON)
    next_version  INTEGER NOT NULL DEFAULT 1,   -- a deleted version's number is never reused
    created_at    REAL NOT NULL,
    created_by    TEXT NOT NULL DEFAULT '',
    updated_at    REAL NOT NULL
);
CREATE TABLE model_versions (
    model         TEXT NOT NULL,
    version       INTEGER NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    labels        TEXT NOT NULL DEFAULT '{}',
    artifact_uri  TEXT NOT NULL,                -- a folder (here or on the cluster's host), or gs://
    copied        INTEGER NOT NULL DEFAULT 0,   -- 1: the folder is $GTC_HOME/models/<model>/<version>, ours
    lineage       TEXT NOT NULL DEFAULT '{}',   -- the job, script, options, trial, metrics, checkpoint, parent
    deployment    TEXT,                         -- NULL while not deployed; serving records its endpoint here
    created_at    REAL NOT NULL,
    created_by    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (model, version)
);
CREATE TABLE model_aliases (
    model    TEXT NOT NULL,
    alias    TEXT NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (model, alias)
);
CREATE TABLE model_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    model    TEXT NOT NULL,
    version  INTEGER,
    time     REAL NOT NULL,
    user     TEXT NOT NULL,
    event    TEXT NOT NULL,                     -- registry/rules.py EVENT_KINDS
    detail   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX model_events_by_model ON model_events (model, id);
-- Registrations that wait for their job to finish (a recipe registers its model when it
-- succeeds): whichever process sees the job end first takes the row and registers, once.
CREATE TABLE model_pending (
    cluster     TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    model       TEXT NOT NULL,
    request     TEXT NOT NULL DEFAULT '{}',    -- register()'s keyword arguments (JSON)
    created_at  REAL NOT NULL,
    PRIMARY KEY (cluster, job_id)
);
