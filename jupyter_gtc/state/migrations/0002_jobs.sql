-- Jobs: one row per submission (an array is one row; its tasks live in `tasks`).
CREATE TABLE jobs (
    cluster      TEXT NOT NULL,
    slurm_id     TEXT NOT NULL,        -- the id sbatch printed (an array's id for arrays)
    name         TEXT NOT NULL,
    state        TEXT NOT NULL,        -- PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
    exit_code    INTEGER,
    job_dir      TEXT NOT NULL,
    options      TEXT NOT NULL DEFAULT '[]',   -- sbatch options given at submit (JSON list)
    tasks        TEXT NOT NULL DEFAULT '{}',   -- array task id -> {state, exit_code} (JSON)
    reason       TEXT,
    nodes        TEXT NOT NULL DEFAULT '',
    start_time   REAL,
    end_time     REAL,
    submitted_at REAL NOT NULL,
    updated_at   REAL NOT NULL,
    PRIMARY KEY (cluster, slurm_id)
);
CREATE INDEX jobs_by_name ON jobs (name, submitted_at);
