//! `pap invocations [--status S] [--json] [--limit N] [--after CURSOR]`: the listing, streamed.
//! Rows are read a page at a time by cursor (each page its own snapshot) and written as they
//! come, so a listing of every invocation (`--json` without `--limit`, as the contract says)
//! holds one page in memory, never the set. Each JSON row carries its `cursor`: `--after` it
//! lists what came after that row, oldest first.

use std::io::Write;

use serde_json::json;

use super::Outcome;
use super::invocations::{AsOf, as_of, row_human};
use crate::cli::InvocationsArgs;
use crate::domain::{Invocation, Status};
use crate::storage::cursor::{self, Kind};
use crate::storage::scan::{Next, Only, Order, Scan};
use crate::storage::{Storage, short_forms};
use crate::term::Paint;

/// A human listing shows this many unless `--limit` says otherwise.
const HUMAN_PAGE: usize = 20;

/// How many rows one read takes before they are written.
const PAGE: usize = 256;

pub(super) fn run(
    store: Option<&dyn Storage>,
    args: &InvocationsArgs,
    now: i64,
) -> anyhow::Result<Outcome> {
    let after = match args
        .after
        .as_deref()
        .map(|c| cursor::decode(Kind::Invocations, c))
    {
        Some(Ok(seq)) => Some(seq),
        Some(Err(e)) => {
            crate::say!("error: --after: {e}");
            return Ok(Outcome::Usage);
        }
        None => None,
    };
    let limit = args.limit.or((!args.json).then_some(HUMAN_PAGE));
    let p = Paint::for_stdout();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let Some(store) = store else {
        if !args.json {
            writeln!(out, "no invocations")?;
        }
        return Ok(Outcome::Success);
    };
    let listing = Listing {
        store,
        status: args.status,
        now,
        json: args.json,
        p,
    };
    let (shown, more) = match (after, limit) {
        (None, Some(n)) => listing.last(n, &mut out)?,
        (after, limit) => listing.forward(after, limit, &mut out)?,
    };
    if !args.json {
        if shown == 0 {
            writeln!(out, "no invocations")?;
        } else {
            writeln!(
                out,
                "{}",
                p.dim("ids are short forms: `pap invocations show ID` takes one, a prefix, or the full id")
            )?;
        }
        match more {
            Some(More::Older) => writeln!(
                out,
                "{}",
                p.dim(&format!("showing the last {shown}; --limit N shows more"))
            )?,
            Some(More::After(c)) => writeln!(
                out,
                "{}",
                p.dim(&format!("more: pap invocations --after {c}"))
            )?,
            None => {}
        }
    }
    out.flush()?;
    Ok(Outcome::Success)
}

/// What a listing left out.
enum More {
    /// Older rows (a listing of the last N).
    Older,
    /// Newer rows, after this cursor.
    After(String),
}

struct Listing<'s> {
    store: &'s dyn Storage,
    status: Option<Status>,
    now: i64,
    json: bool,
    p: Paint,
}

impl Listing<'_> {
    fn scan(&self, order: Order, after: Option<u64>) -> Scan {
        Scan {
            // The awaiting ones have an index; any other status is a filter on the scan.
            only: if self.status == Some(Status::AwaitingApproval) {
                Only::Awaiting
            } else {
                Only::All
            },
            order,
            after,
            now: self.now,
        }
    }

    fn keeps(&self, inv: &Invocation) -> bool {
        self.status.is_none_or(|st| inv.status_at(self.now) == st)
    }

    /// Up to `max` rows the listing keeps from `scan`, and the sequence number of the last
    /// row the scan looked at (where the next page starts).
    fn page(&self, scan: &Scan, max: usize) -> anyhow::Result<(Vec<Invocation>, Option<u64>)> {
        Ok(self.store.read(|r| {
            let (mut rows, mut last) = (Vec::new(), None);
            r.scan_invocations(scan, &mut |inv| {
                last = Some(inv.seq);
                if self.keeps(&inv) {
                    rows.push(inv);
                }
                Ok(if rows.len() < max {
                    Next::More
                } else {
                    Next::Stop
                })
            })?;
            Ok((rows, last))
        })?)
    }

    /// The rows after `after` (all of them, or the first `limit`), oldest first, a page at a
    /// time; returns how many were written, and whether more follow.
    fn forward(
        &self,
        mut after: Option<u64>,
        limit: Option<usize>,
        out: &mut impl Write,
    ) -> anyhow::Result<(usize, Option<More>)> {
        let shorts = short_forms::Streamed::new(self.store)?;
        let mut shown = 0;
        loop {
            let remaining = limit.map(|n| n - shown);
            if remaining == Some(0) {
                // One more look, to say whether more follow.
                let (next, _) = self.page(&self.scan(Order::Oldest, after), 1)?;
                let more = (!next.is_empty())
                    .then(|| More::After(cursor::encode(Kind::Invocations, after.unwrap_or(0))));
                return Ok((shown, more));
            }
            let want = remaining.map_or(PAGE, |r| r.min(PAGE));
            let (rows, last) = self.page(&self.scan(Order::Oldest, after), want)?;
            let full = rows.len() == want;
            for inv in rows {
                let short = shorts.short(&inv.id)?;
                self.write(as_of(inv, self.now), &short, out)?;
                shown += 1;
            }
            // A full page stopped at its last row; one that is not full read to the end.
            match last {
                Some(last) if full => after = Some(last),
                _ => return Ok((shown, None)),
            }
        }
    }

    /// The last `n` rows, oldest first (one newest-first read of `n` + 1 rows).
    fn last(&self, n: usize, out: &mut impl Write) -> anyhow::Result<(usize, Option<More>)> {
        let (mut rows, _) = self.page(&self.scan(Order::Newest, None), n.saturating_add(1))?;
        let more = (rows.len() > n).then_some(More::Older);
        rows.truncate(n);
        rows.reverse();
        let ids: Vec<&str> = rows.iter().map(|i| i.id.as_str()).collect();
        let shorts = if ids.is_empty() {
            Default::default()
        } else {
            short_forms::short_forms(self.store, &ids)?
        };
        let shown = rows.len();
        for inv in rows {
            let short = shorts
                .get(&inv.id)
                .cloned()
                .unwrap_or_else(|| inv.id.clone());
            self.write(as_of(inv, self.now), &short, out)?;
        }
        Ok((shown, more))
    }

    fn write(&self, shown: AsOf, short: &str, out: &mut impl Write) -> anyhow::Result<()> {
        if self.json {
            let mut row = shown.view(false);
            row["short_id"] = json!(short);
            row["cursor"] = json!(cursor::encode(Kind::Invocations, shown.inv.seq));
            serde_json::to_writer(&mut *out, &row)?;
            out.write_all(b"\n")?;
        } else {
            let mut text = String::new();
            row_human(&shown, short, self.p, &mut text);
            crate::term::escape_from(&mut text, 0);
            out.write_all(text.as_bytes())?;
        }
        Ok(())
    }
}
