//! The purge of records past their retention on PostgreSQL: the same steps as the file
//! store's `tx_retention`, each bounded by `LIMIT`. Rows another node is changing are
//! skipped (`SKIP LOCKED`) and looked at again by a later pass, so two nodes purging at once
//! never wait for each other.

use super::session::{signed, unsigned};
use super::write::{PgWrite, limit};
use pap_domain::{Invocation, Notification};
use pap_storage::Result;
use pap_storage::purge::{DebounceCursor, Purged};

/// The result of a step that deletes the oldest rows up to the first young one: a row of
/// (rows deleted, whether a young row stopped it).
fn oldest_gone(r: &postgres::Row, max: usize) -> Purged {
    let (gone, young): (i64, bool) = (r.get(0), r.get(1));
    let gone = usize::try_from(gone).unwrap_or(0);
    Purged::walked(gone, gone, max, young, None::<()>).0
}

impl PgWrite<'_> {
    pub(super) fn purge_throttle_step(
        &mut self,
        cutoff: i64,
        after: Option<&DebounceCursor>,
        max: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        // Bucket names are never empty, so ('', '') is before every key.
        let (b, k) = after.map_or(("", ""), |(b, k)| (b.as_str(), k.as_str()));
        let rows = self.s.query(
            "SELECT trigger_id, window_key, (SELECT max(t) FROM unnest(times) t) \
             FROM pap_throttle WHERE (trigger_id, window_key) > ($1, $2) \
             ORDER BY trigger_id, window_key LIMIT $3 FOR UPDATE SKIP LOCKED",
            &[&b, &k, &limit(max)],
        )?;
        let (mut buckets, mut keys) = (Vec::new(), Vec::new());
        let mut last = None;
        for r in &rows {
            let (bucket, key, newest): (String, String, Option<i64>) =
                (r.get(0), r.get(1), r.get(2));
            if newest.is_none_or(|t| t < cutoff) {
                buckets.push(bucket.clone());
                keys.push(key.clone());
            }
            last = Some((bucket, key));
        }
        if !buckets.is_empty() {
            self.s.execute(
                "DELETE FROM pap_throttle p USING unnest($1::text[], $2::text[]) AS g(b, k) \
                 WHERE p.trigger_id = g.b AND p.window_key = g.k",
                &[&buckets, &keys],
            )?;
        }
        Ok(Purged::walked(buckets.len(), rows.len(), max, false, last))
    }

    pub(super) fn purge_invocations_step(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        max: usize,
    ) -> Result<(Purged, Option<u64>)> {
        let after = after.map_or(-1, signed);
        let rows = self.s.query(
            "SELECT id, seq, record::text FROM pap_invocations WHERE seq > $1 \
             ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED",
            &[&after, &limit(max)],
        )?;
        let mut gone: Vec<String> = Vec::new();
        let (mut scanned, mut last, mut young) = (0, None, false);
        for r in &rows {
            let (id, seq): (String, i64) = (r.get(0), r.get(1));
            let inv: Invocation = self.s.decode(&format!("invocation {id}"), r.get(2))?;
            if inv.created_at >= cutoff {
                young = true;
                break;
            }
            scanned += 1;
            last = Some(unsigned(seq));
            if inv.expired_by(cutoff) {
                gone.push(id);
            }
        }
        if !gone.is_empty() {
            // The event's body is part of the record here: nothing else to remove.
            self.s
                .execute("DELETE FROM pap_invocations WHERE id = ANY($1)", &[&gone])?;
        }
        Ok(Purged::walked(gone.len(), scanned, max, young, last))
    }

    pub(super) fn purge_notifications_step(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        max: usize,
    ) -> Result<(Purged, Option<u64>)> {
        let after = after.map_or(-1, signed);
        let rows = self.s.query(
            "SELECT id, seq, record::text FROM pap_notifications WHERE seq > $1 \
             ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED",
            &[&after, &limit(max)],
        )?;
        let (mut ids, mut keys, mut atps) = (Vec::new(), Vec::new(), Vec::new());
        let (mut scanned, mut last, mut young) = (0, None, false);
        for r in &rows {
            let (id, seq): (String, i64) = (r.get(0), r.get(1));
            let n: Notification = self.s.decode(&format!("notification {id}"), r.get(2))?;
            if n.created_at >= cutoff {
                young = true;
                break;
            }
            scanned += 1;
            last = Some(unsigned(seq));
            if n.expired_by(cutoff) {
                keys.extend(n.deduplication_key.clone());
                atps.extend(n.atp_id().map(str::to_owned));
                ids.push(id);
            }
        }
        if !ids.is_empty() {
            self.s
                .execute("DELETE FROM pap_notifications WHERE id = ANY($1)", &[&ids])?;
            // A key or ATP id that a later notification took over stays.
            self.s.execute(
                "DELETE FROM pap_notify_dedup WHERE key = ANY($1) AND notification_id = ANY($2)",
                &[&keys, &ids],
            )?;
            self.s.execute(
                "DELETE FROM pap_atp WHERE atp_id = ANY($1) AND notification_id = ANY($2)",
                &[&atps, &ids],
            )?;
            self.notifications_changed = true;
        }
        Ok(Purged::walked(ids.len(), scanned, max, young, last))
    }

    pub(super) fn purge_inbox_step(&mut self, cutoff: i64, max: usize) -> Result<Purged> {
        // The oldest `max` messages; those before the first young one go.
        let r = self.s.query_one(
            "WITH head AS (SELECT id, (message->>'ts')::bigint AS ts FROM pap_inbox \
             ORDER BY id LIMIT $1), \
             young AS (SELECT min(id) AS id FROM head WHERE ts >= $2), \
             gone AS (DELETE FROM pap_inbox i USING head h WHERE i.id = h.id AND h.ts < $2 \
             AND h.id < coalesce((SELECT id FROM young), 9223372036854775807) RETURNING 1) \
             SELECT (SELECT count(*) FROM gone), (SELECT id FROM young) IS NOT NULL",
            &[&limit(max), &cutoff],
        )?;
        Ok(oldest_gone(&r, max))
    }

    pub(super) fn purge_audit_step(&mut self, cutoff: i64, max: usize) -> Result<Purged> {
        let r = self.s.query_one(
            "WITH head AS (SELECT seq, (entry->>'at')::bigint AS at FROM pap_audit \
             ORDER BY seq LIMIT $1), \
             young AS (SELECT min(seq) AS seq FROM head WHERE at >= $2), \
             gone AS (DELETE FROM pap_audit a USING head h WHERE a.seq = h.seq AND h.at < $2 \
             AND h.seq < coalesce((SELECT seq FROM young), 9223372036854775807) RETURNING 1) \
             SELECT (SELECT count(*) FROM gone), (SELECT seq FROM young) IS NOT NULL",
            &[&limit(max), &cutoff],
        )?;
        Ok(oldest_gone(&r, max))
    }
}
