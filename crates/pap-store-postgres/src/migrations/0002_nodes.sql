-- Expand: the nodes sharing this database, each as its last heartbeat left it (`pap
-- status` lists them). Times are the database's clock, in milliseconds.
CREATE TABLE pap_nodes (
    node_id    text PRIMARY KEY,
    host       text NOT NULL,
    pid        integer NOT NULL,
    version    text NOT NULL,
    started_at bigint NOT NULL,
    last_seen  bigint NOT NULL,
    listen     text
);
