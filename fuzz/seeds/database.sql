-- A small stand-in database file for the database fuzz target's seed: WAL mode, a few tables and
-- rows (the fuzzer mutates pages and header fields; dionsim must refuse or open every variant).
PRAGMA journal_mode = DELETE;
PRAGMA application_id = 1145655118;
PRAGMA user_version = 1;
CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, config_hash TEXT, status TEXT);
CREATE INDEX runs_by_hash ON runs (kind, config_hash);
CREATE TABLE metrics (run_id INTEGER, name TEXT, value REAL);
CREATE TABLE phases (run_id INTEGER);
CREATE TABLE collectives (run_id INTEGER);
CREATE TABLE deferral (run_id INTEGER);
INSERT INTO runs (kind, config_hash, status) VALUES ('whatif', 'abc', 'ok'), ('step', 'def', 'failed');
INSERT INTO metrics VALUES (1, 'step_wall_ms', 12.5);
