-- pap's state on PostgreSQL, first schema. Times are milliseconds since the Unix epoch
-- (bigint), as in the engine; records the engine reads whole are `json` (kept as written,
-- key order included), with the columns the store looks things up by beside them.

-- Counters that must become visible in the order they were taken (the inbox id: a reader
-- holding watermark 42 must never miss 41 committed later). A row lock orders them.
CREATE TABLE pap_counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO pap_counters (name, value) VALUES ('inbox', 0);

-- Numbers that only need to grow and never repeat.
CREATE SEQUENCE pap_invocation_seq;
CREATE SEQUENCE pap_notification_seq;
CREATE SEQUENCE pap_audit_seq;
CREATE SEQUENCE pap_ledger_row;
CREATE SEQUENCE pap_queue_seq;
CREATE SEQUENCE pap_lease_token;

-- SHA-256(event id ‖ trigger id) → the claim and the ledger row of its decision.
CREATE TABLE pap_claims (
    key        bytea PRIMARY KEY,
    expires_at bigint NOT NULL,
    decided_at bigint NOT NULL,
    row_no     bigint NOT NULL
);
CREATE INDEX pap_claims_expiry ON pap_claims (expires_at);

CREATE TABLE pap_ledger (
    row_no        bigint PRIMARY KEY,
    event_id      text NOT NULL,
    trigger_id    text NOT NULL,
    kind          text NOT NULL,
    depth         integer NOT NULL,
    outcome       text NOT NULL,
    invocation_id text,
    decided_at    bigint NOT NULL
);
CREATE INDEX pap_ledger_event ON pap_ledger (event_id);

CREATE TABLE pap_throttle (
    trigger_id text NOT NULL,
    window_key text NOT NULL,
    times      bigint[] NOT NULL,
    PRIMARY KEY (trigger_id, window_key)
);

CREATE TABLE pap_debounce (
    trigger_id text NOT NULL,
    window_key text NOT NULL,
    state      json NOT NULL,
    due_at     bigint,
    PRIMARY KEY (trigger_id, window_key)
);
CREATE INDEX pap_debounce_due ON pap_debounce (due_at, trigger_id, window_key)
    WHERE due_at IS NOT NULL;

CREATE TABLE pap_budget_tokens (
    agent text PRIMARY KEY,
    uses  json NOT NULL
);

-- work_at: when a queued invocation falls due (a running one: -2^63, looked at first);
-- null once it is neither. approval_deadline: only while it awaits approval.
CREATE TABLE pap_invocations (
    id                text PRIMARY KEY,
    seq               bigint NOT NULL,
    status            text NOT NULL,
    work_at           bigint,
    approval_deadline bigint,
    lease_token       bigint,
    record            json NOT NULL
);
CREATE INDEX pap_invocations_seq ON pap_invocations (seq);
CREATE INDEX pap_invocations_work ON pap_invocations (work_at, id) WHERE work_at IS NOT NULL;
CREATE INDEX pap_invocations_deadline ON pap_invocations (approval_deadline, id)
    WHERE approval_deadline IS NOT NULL;

-- Who waits for (state 0) or holds (1; 2 while stopping, until stopping_until) a
-- concurrency slot, in decision order.
CREATE TABLE pap_concurrency (
    slot_key       text NOT NULL,
    seq            bigint NOT NULL,
    state          smallint NOT NULL,
    stopping_until bigint,
    invocation_id  text NOT NULL,
    PRIMARY KEY (slot_key, seq)
);
CREATE INDEX pap_concurrency_invocation ON pap_concurrency (invocation_id);

CREATE TABLE pap_schedules (
    id        text PRIMARY KEY,
    last_fire bigint NOT NULL
);

CREATE TABLE pap_outbox (
    event_id text PRIMARY KEY,
    entry    json NOT NULL
);

CREATE TABLE pap_audit (
    seq   bigint PRIMARY KEY,
    entry json NOT NULL
);

CREATE TABLE pap_notifications (
    id     text PRIMARY KEY,
    seq    bigint NOT NULL,
    record json NOT NULL
);
CREATE INDEX pap_notifications_seq ON pap_notifications (seq);

CREATE TABLE pap_notify_dedup (
    key             text PRIMARY KEY,
    notification_id text NOT NULL
);

CREATE TABLE pap_jobs (
    due_at bigint NOT NULL,
    job    text NOT NULL,
    PRIMARY KEY (due_at, job)
);

CREATE TABLE pap_inbox (
    id      bigint PRIMARY KEY,
    message json NOT NULL
);

CREATE TABLE pap_agent_queue (
    agent           text NOT NULL,
    seq             bigint NOT NULL,
    notification_id text NOT NULL,
    PRIMARY KEY (agent, seq)
);

CREATE TABLE pap_sessions (
    name      text PRIMARY KEY,
    opened_at bigint NOT NULL
);

CREATE TABLE pap_session_agents (
    name  text PRIMARY KEY,
    agent text NOT NULL
);

CREATE TABLE pap_atp (
    atp_id          text PRIMARY KEY,
    notification_id text NOT NULL
);
