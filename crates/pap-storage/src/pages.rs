//! Pages of invocations for the console, the JSON API and the MCP `invocations_list` tool: read by keyset from a cursor (see
//! `storage::cursor`), a page at a time, so a request's cost is its page's, never the
//! store's. A cursor stays right while invocations are added: approvals page oldest first
//! (new ones come at the end), invocations newest first (new ones come before page one).

use serde::Deserialize;

use super::Storage;
use super::cursor::{self, BadCursor, Kind};
use super::scan::{Next, Only, Order, Scan};
use crate::domain::{Invocation, Status};

/// Approvals a page shows.
pub const APPROVALS_PAGE: usize = 25;
/// Invocations a page shows.
pub const INVOCATIONS_PAGE: usize = 50;
/// Most invocations one filtered page looks at (an agent or trigger filter is not indexed):
/// past them it stops and offers to go on.
pub const SCAN_BUDGET: usize = 10_000;

/// One page, and the cursor of the next (none at the end).
pub struct Page {
    pub rows: Vec<Invocation>,
    pub next: Option<String>,
    /// The page stopped at [`SCAN_BUDGET`] before it was full.
    pub budget_spent: bool,
}

/// `?status=&agent=&trigger=` of the invocation pages.
#[derive(Debug, Default, Deserialize)]
pub struct InvocationFilter {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub trigger: Option<String>,
}

impl InvocationFilter {
    fn keeps(&self, i: &Invocation, now: i64) -> bool {
        let is = |want: &Option<String>, have: &str| {
            want.as_deref().is_none_or(|w| w.is_empty() || w == have)
        };
        is(&self.status, i.status_at(now).as_str())
            && is(&self.agent, &i.agent)
            && is(&self.trigger, &i.trigger)
    }

    fn only(&self) -> Only {
        if self.status.as_deref() == Some(Status::AwaitingApproval.as_str()) {
            Only::Awaiting
        } else {
            Only::All
        }
    }
}

/// The cursor a request carries (`?after=` or `?before=`), checked against the listing.
pub fn parse(kind: Kind, text: Option<&str>) -> Result<Option<u64>, BadCursor> {
    match text.filter(|t| !t.is_empty()) {
        Some(t) => cursor::decode(kind, t).map(Some),
        None => Ok(None),
    }
}

/// Approvals waiting as of `now`, oldest first, after `after`; `with_event`: each with its
/// event (the console shows its data).
pub fn approvals(
    store: &dyn Storage,
    now: i64,
    after: Option<u64>,
    size: usize,
    with_event: bool,
) -> super::Result<Page> {
    let scan = Scan {
        only: Only::Awaiting,
        order: Order::Oldest,
        after,
        now,
    };
    store.read(|r| {
        let mut rows = Vec::new();
        r.scan_invocations(&scan, &mut |inv| {
            rows.push(inv);
            Ok(if rows.len() < size {
                Next::More
            } else {
                Next::Stop
            })
        })?;
        if with_event {
            for inv in &mut rows {
                if let Some(whole) = r.invocation(&inv.id)? {
                    inv.event = whole.event;
                }
            }
        }
        let next = (rows.len() == size)
            .then(|| rows.last().map(|i| cursor::encode(Kind::Approvals, i.seq)))
            .flatten();
        Ok(Page {
            rows,
            next,
            budget_spent: false,
        })
    })
}

/// Invocations `filter` keeps, newest first, before `before`, looking at no more than
/// [`SCAN_BUDGET`] of them.
pub fn invocations(
    store: &dyn Storage,
    filter: &InvocationFilter,
    now: i64,
    before: Option<u64>,
    size: usize,
) -> super::Result<Page> {
    let scan = Scan {
        only: filter.only(),
        order: Order::Newest,
        after: before,
        now,
    };
    store.read(|r| {
        let (mut rows, mut looked, mut last) = (Vec::new(), 0, None);
        r.scan_invocations(&scan, &mut |inv| {
            looked += 1;
            last = Some(inv.seq);
            if filter.keeps(&inv, now) {
                rows.push(inv);
            }
            Ok(if rows.len() < size && looked < SCAN_BUDGET {
                Next::More
            } else {
                Next::Stop
            })
        })?;
        let stopped = rows.len() == size || looked >= SCAN_BUDGET;
        Ok(Page {
            budget_spent: rows.len() < size && looked >= SCAN_BUDGET,
            next: last
                .filter(|_| stopped)
                .map(|seq| cursor::encode(Kind::Invocations, seq)),
            rows,
        })
    })
}
