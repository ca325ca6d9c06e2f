-- Tuning studies: one row each. Their trials live in Optuna's own storage (an RDB file per
-- study, `storage`); each trial's Slurm job is a row of `jobs` and is named in the trial's
-- user attributes. JSON columns, never pickles.
CREATE TABLE studies (
    name          TEXT PRIMARY KEY,
    cluster       TEXT NOT NULL,
    spec          TEXT NOT NULL,           -- the validated TuningSpec, snake_case JSON
    state         TEXT NOT NULL,           -- RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED
    reason        TEXT,                    -- why it ended (or is stopping)
    study_dir     TEXT NOT NULL,           -- <GTC_HOME>/studies/<name>: trial folders, Optuna's file
    storage       TEXT NOT NULL,           -- Optuna storage URL
    sampler       TEXT NOT NULL DEFAULT '',   -- which sampler drives it, and why
    stop_trials   TEXT NOT NULL DEFAULT '[]', -- trial numbers a watcher asked the driver to stop (JSON)
    driver_pid    INTEGER,                 -- the process whose thread drives the study
    driver_host   TEXT,
    heartbeat_at  REAL,                    -- the driver's last sign of life
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);
CREATE INDEX studies_by_cluster ON studies (cluster, created_at);
