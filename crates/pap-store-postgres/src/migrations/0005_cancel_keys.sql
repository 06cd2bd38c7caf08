-- The unfinished invocations a trigger's `cancel_on` may end, by trigger and cancel key
-- (issue 34): an event that cancels reads only these rows. Expand only: the key lives in the
-- record, which nodes of schema 4 write whole, so PostgreSQL keeps the index right for them.
CREATE INDEX pap_invocations_cancel ON pap_invocations
    ((record->>'trigger'), (record#>>'{cancel,key}'), seq)
    WHERE record->'cancel' IS NOT NULL
      AND status IN ('queued', 'awaiting_approval', 'running');
