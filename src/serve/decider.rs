//! Handing events from the HTTP listener to serve's deciding thread, and the answer back.
//!
//! The listener never writes the store itself: its events go to the one thread that owns the
//! decisions, which decides everything that is waiting in one transaction (group commit: a
//! hundred concurrent single-event requests cost one sync, not a hundred) and answers each
//! request once that transaction is durable. The number of events waiting is bounded; past
//! the bound a request is refused before anything of it is recorded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use tokio::sync::oneshot;

use super::Wake;
use crate::dispatcher::Pending;
use crate::pipeline::report::EventReport;

/// One request's events, waiting for the deciding thread.
pub struct IngestRequest {
    pub events: Vec<Pending>,
    pub reply: oneshot::Sender<Result<Vec<EventReport>, String>>,
    /// Gives the request's events back to the bound when the request is done with (decided,
    /// or dropped at shutdown).
    _slot: QueueSlot,
}

struct QueueSlot {
    queued: Arc<AtomicUsize>,
    events: usize,
}

impl Drop for QueueSlot {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.events, Ordering::AcqRel);
    }
}

impl IngestRequest {
    /// The events, and where their answer goes.
    pub fn into_parts(self) -> (Vec<Pending>, Reply) {
        (
            self.events,
            Reply {
                to: self.reply,
                _slot: self._slot,
            },
        )
    }
}

/// Where one request's answer goes; its events stay counted until it is sent.
pub struct Reply {
    to: oneshot::Sender<Result<Vec<EventReport>, String>>,
    _slot: QueueSlot,
}

impl Reply {
    pub fn send(self, answer: Result<Vec<EventReport>, String>) {
        // A client that went away has no one to tell; its events are decided all the same.
        let _ = self.to.send(answer);
    }
}

/// Why events were not decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Serve is stopping (or stopped before deciding them): nothing was recorded.
    Stopping,
    /// More events wait than `listen.max_queued_events`: nothing was recorded.
    Overloaded,
    /// The store failed: the transaction was not committed, nothing was recorded.
    Failed(String),
}

/// The listener's handle on the deciding thread.
#[derive(Clone)]
pub struct Decider {
    wakes: Sender<Wake>,
    queued: Arc<AtomicUsize>,
    /// `listen.max_queued_events`, which a reload may change.
    max_queued: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Decider {
    pub fn new(wakes: Sender<Wake>, max_queued: usize, stop: Arc<AtomicBool>) -> Decider {
        Decider {
            wakes,
            queued: Arc::new(AtomicUsize::new(0)),
            max_queued: Arc::new(AtomicUsize::new(max_queued)),
            stop,
        }
    }

    /// A reload's `listen.max_queued_events`, for requests from now on.
    pub fn set_max_queued(&self, max: usize) {
        self.max_queued.store(max, Ordering::Release);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Tells the deciding thread that work is queued (an approval), and hands it events a
    /// change outside it emitted (a rejection's failure events, already in the outbox).
    pub fn poke(&self, emitted: Vec<crate::event::Event>) {
        if !emitted.is_empty() {
            let _ = self.wakes.send(Wake::Emitted(emitted));
        }
        let _ = self.wakes.send(Wake::Work);
    }

    /// Events waiting now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Whether a request would be refused now because the queue is at its bound
    /// (`listen.max_queued_events`), as [`Decider::decide`] refuses one.
    pub fn full(&self) -> bool {
        let queued = self.queued();
        queued > 0 && queued >= self.max_queued.load(Ordering::Acquire)
    }

    /// Decides `events` (valid ones; invalid ones are reported by the caller) and returns
    /// their reports once the decisions are durable.
    pub async fn decide(&self, events: Vec<Pending>) -> Result<Vec<EventReport>, Refused> {
        if self.stopping() {
            return Err(Refused::Stopping);
        }
        let n = events.len();
        let before = self.queued.fetch_add(n, Ordering::AcqRel);
        let slot = QueueSlot {
            queued: self.queued.clone(),
            events: n,
        };
        // One request larger than the whole bound still goes through when nothing else
        // waits; it is bounded by the body size limit.
        if before > 0 && before + n > self.max_queued.load(Ordering::Acquire) {
            return Err(Refused::Overloaded);
        }
        let (reply, answer) = oneshot::channel();
        let request = IngestRequest {
            events,
            reply,
            _slot: slot,
        };
        if self.wakes.send(Wake::Ingest(request)).is_err() {
            return Err(Refused::Stopping);
        }
        match answer.await {
            Ok(Ok(reports)) => Ok(reports),
            Ok(Err(why)) => Err(Refused::Failed(why)),
            // The deciding thread ended without taking the request: nothing was recorded.
            Err(_) => Err(Refused::Stopping),
        }
    }
}

/// Test builds only: `PAP_TEST_INGEST_DELAY_MS` holds posted events this long before they are
/// decided, so the suite can fill the queue or stop serve while requests wait, without
/// racing a deciding thread that is otherwise faster than any client. Release builds have
/// no such variable.
pub fn test_delay() {
    #[cfg(feature = "test-clock")]
    if let Some(ms) = std::env::var("PAP_TEST_INGEST_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}
