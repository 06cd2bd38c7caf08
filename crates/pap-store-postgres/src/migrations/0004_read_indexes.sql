-- Reads that do not grow with the table: the invocations of one status in creation order
-- (a page of the oldest approvals, counts of the active statuses by index), so listings page
-- by keyset (seq) with LIMIT and counts never load the set. Expand only: nodes of schema 3
-- keep the index correct (PostgreSQL maintains it).
CREATE INDEX pap_invocations_status_seq ON pap_invocations (status, seq);
