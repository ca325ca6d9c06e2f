-- What a cluster's supervisor noticed and did (detected, down, restarted, gave up, hang), one
-- row per decision, oldest first by id. A restarted supervisor reads them back: its attempt
-- counts and the nodes it gave up on outlive its process. Removed with the cluster.
CREATE TABLE cluster_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster TEXT NOT NULL,
    time    REAL NOT NULL,
    node    TEXT NOT NULL,
    event   TEXT NOT NULL,
    detail  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX cluster_events_by_cluster ON cluster_events (cluster, id);
