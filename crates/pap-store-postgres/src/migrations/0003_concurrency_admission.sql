-- Contract: a queued invocation waiting for concurrency keys is due work only while every key
-- admits it. A key admits its first waiters in decision order, as many as it has free slots;
-- each waiter's admission is kept on its entry, written under the key's advisory lock, and due
-- work reads the admitted entries (a key's first `limit` at most) instead of the whole queue.
-- Nodes of schema 2 would list every waiter as due work and never admit one: stop them before
-- migrating (compat_min becomes 3).
ALTER TABLE pap_concurrency
    -- A waiter (state 0): from when its key admits it (-2^63: at once); null: not admitted.
    ADD COLUMN admitted_at bigint,
    -- A waiter: when it falls due leaving its keys aside (next attempt, else creation).
    ADD COLUMN due_at bigint,
    -- A waiter: how many keys it has (it is due once all of them admit it).
    ADD COLUMN nkeys smallint;
CREATE INDEX pap_concurrency_holders ON pap_concurrency (slot_key) WHERE state <> 0;
CREATE INDEX pap_concurrency_admitted ON pap_concurrency (invocation_id)
    WHERE state = 0 AND admitted_at IS NOT NULL;

-- Per key with waiters: the limit they were admitted under, and how many are admitted.
CREATE TABLE pap_concurrency_keys (
    slot_key   text PRIMARY KEY,
    slot_limit integer NOT NULL,
    admitted   integer NOT NULL
);

UPDATE pap_concurrency c
   SET due_at = coalesce((i.record->>'next_attempt_at')::bigint,
                         (i.record->>'created_at')::bigint),
       nkeys = json_array_length(i.record->'concurrency')
  FROM pap_invocations i
 WHERE i.id = c.invocation_id AND c.state = 0;

-- Waiters leave the due-work index; the migration then admits each key's first ones.
UPDATE pap_invocations SET work_at = NULL
 WHERE status = 'queued' AND id IN (SELECT invocation_id FROM pap_concurrency WHERE state = 0);
