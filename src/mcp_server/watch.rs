//! What changed in the store, made by this process or any other, for the sessions
//! subscribed to it (`forward` tells each session's client).
//!
//! One watcher per server looks every [`LOOK_EVERY`] at two small files beside the store:
//! the inbox mark (`storage::inbox_mark`, the newest inbox id) and the notifications mark
//! (`storage::notification_mark`, a token rewritten after each commit that changed a
//! notification). A look reads a few bytes; only when a mark moved does the watcher open the
//! store. On a shared store it also hears of other nodes' commits through the store
//! (`Storage::listen`: PostgreSQL's `LISTEN/NOTIFY`).
//!
//! It broadcasts:
//! - each new inbox message;
//! - a notification shown in the inbox's window (the newest messages of `ui://chat/inbox`)
//!   that changed without a message telling of it (acknowledged or answered in another
//!   process, a sink's result): the watcher keeps a fingerprint of each, and re-reads them
//!   (at most the window's size) only when the notifications mark moved;
//! - that some notification changed: each session compares the notifications it subscribed
//!   to with what it was last told of;
//! - a notification whose delivery deadline passed (ANP 6.2): the watcher keeps one timer,
//!   for the earliest pending watchdog deadline (read from the timer index, never by
//!   reading every notification), armed only while someone listens and re-read when a
//!   notification changes. Every read shows the escalation as of now, so a subscriber that
//!   re-reads sees it though no writer recorded it yet.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::forward::fingerprint;
use super::resources::INBOX_WINDOW;
use crate::clock::Clock;
use crate::domain::InboxMessage;
use crate::storage::{Change, Storage, inbox_mark, notification_mark};

/// How often the mark files are looked at: well inside the second a subscriber may wait.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);
/// Messages read per look at most; the next look goes on from there.
const READ_AT_ONCE: usize = 512;
/// Deadlines read per look at most; the next look goes on from the last one read.
const DEADLINES_AT_ONCE: usize = 512;

/// One change, as broadcast to every session's forwarder.
#[derive(Debug, Clone)]
pub(crate) enum Update {
    /// A message appended to the inbox.
    Message(Arc<InboxMessage>),
    /// Notification `id` changed as of now: its delivery deadline passed (ANP 6.2), or it is
    /// shown in the inbox and changed without a new message. `session` is the thread it
    /// shows in; `print` its fingerprint now (`forward::fingerprint`).
    Changed {
        id: String,
        session: Option<String>,
        print: u64,
    },
    /// Some notification changed: each session compares those it subscribed to.
    Notifications,
}

/// Where the watcher broadcasts.
pub(crate) type Changes = broadcast::Sender<Update>;

/// What the watcher reads in the store, off the async runtime.
async fn read<T: Send + 'static>(
    store: &Arc<dyn Storage>,
    f: impl FnOnce(&dyn crate::storage::ReadTx) -> crate::storage::Result<T> + Send + 'static,
) -> Option<T> {
    let store = store.clone();
    match tokio::task::spawn_blocking(move || store.read(|r| f(r))).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the MCP watcher cannot read the store");
            None
        }
        Err(_) => None,
    }
}

/// The earliest watchdog deadline after `after`, if any (another timer job may come first:
/// then that one's time, and the look at it finds nothing to tell).
async fn next_deadline(store: &Arc<dyn Storage>, after: i64) -> Option<i64> {
    read(store, move |r| r.jobs_between(after, i64::MAX, 1))
        .await
        .and_then(|jobs| jobs.first().map(|(at, _)| *at))
}

struct Watcher {
    store: Arc<dyn Storage>,
    clock: Clock,
    inbox_file: PathBuf,
    notifications_file: PathBuf,
    /// The newest inbox id broadcast (or skipped while nobody listened).
    last: u64,
    /// The notifications mark last read.
    token: Option<String>,
    /// Deadlines up to this moment were looked at.
    checked_until: i64,
    /// The next deadline to wake for; `None` when it must be read again.
    next: Option<Option<i64>>,
    /// The notifications of the newest inbox messages, oldest first: (message, notification,
    /// thread); `None` until read while someone listens.
    window: Option<VecDeque<(u64, String, Option<String>)>>,
    /// The fingerprint of each notification in the window.
    prints: HashMap<String, u64>,
}

/// Starts the watcher of the state in `state_dir` on the current tokio runtime, on `clock`
/// (a test's fake clock moves to the next deadline when the watcher waits for it). It stops
/// when every sender is dropped.
pub(crate) fn start(store: Arc<dyn Storage>, state_dir: &Path, clock: Clock) -> Changes {
    let (changes, _) = broadcast::channel(1024);
    let weak = changes.downgrade();
    let inbox_file = inbox_mark::inbox_mark_path(state_dir);
    let notifications_file = notification_mark::notifications_mark_path(state_dir);
    tokio::spawn(async move {
        let last = read(&store, |r| r.inbox_last()).await.unwrap_or(0);
        let mut w = Watcher {
            token: notification_mark::read(&notifications_file),
            checked_until: clock.now_ms(),
            store,
            clock,
            inbox_file,
            notifications_file,
            last,
            next: None,
            window: None,
            prints: HashMap::new(),
        };
        // On a shared store, other nodes' commits are heard of through the store; the mark
        // files only tell of this host's.
        let appended = Arc::new(tokio::sync::Notify::new());
        let changed = Arc::new(tokio::sync::Notify::new());
        let _listening = {
            let (appended, changed) = (appended.clone(), changed.clone());
            w.store.listen(Box::new(move |change| match change {
                Change::Inbox => appended.notify_one(),
                Change::Notifications => changed.notify_one(),
                Change::Work => {}
            }))
        };
        let mut ticker = tokio::time::interval(LOOK_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let Some(changes) = weak.upgrade() else {
                return;
            };
            let listened = changes.receiver_count() > 0;
            let wake = match (listened, w.next) {
                (true, Some(Some(at))) => Some(at.saturating_sub(w.clock.now_ms()).max(0)),
                _ => None,
            };
            drop(changes);
            let (mut elsewhere_appended, mut elsewhere_changed) = (false, false);
            tokio::select! {
                _ = ticker.tick() => {}
                () = appended.notified() => elsewhere_appended = true,
                () = changed.notified() => elsewhere_changed = true,
                () = sleep(&w.clock, wake) => {}
            }
            let Some(changes) = weak.upgrade() else {
                return;
            };
            w.look(&changes, elsewhere_appended, elsewhere_changed)
                .await;
        }
    });
    changes
}

/// Waits `ms` on `clock` (at once on a fake clock, which moves); forever without a time.
async fn sleep(clock: &Clock, ms: Option<i64>) {
    match ms {
        Some(ms) => clock.sleep(Duration::from_millis(ms as u64)).await,
        None => std::future::pending().await,
    }
}

impl Watcher {
    async fn look(&mut self, changes: &Changes, appended: bool, changed: bool) {
        let token = notification_mark::read(&self.notifications_file);
        let token_moved = token.is_some() && token != self.token;
        self.token = token.or(self.token.take());
        let now = self.clock.now_ms();
        if changes.receiver_count() == 0 {
            // Nobody listens: only keep the watermarks current.
            self.last = self.last.max(read_mark(&self.inbox_file).unwrap_or(0));
            if appended {
                self.last = self
                    .last
                    .max(read(&self.store, |r| r.inbox_last()).await.unwrap_or(0));
            }
            self.checked_until = now;
            self.next = None;
            self.window = None;
            return;
        }
        if self.window.is_none() {
            // A change committed since someone subscribed may already be in what is read
            // now: each session compares it with what it saw when it subscribed, at the
            // first `Notifications` after this (`forward`).
            self.fill_window().await;
        }
        self.messages(changes, appended).await;
        if token_moved || changed {
            self.window_changes(changes).await;
            let _ = changes.send(Update::Notifications);
            // A new deadline may have come, or the next one gone.
            self.next = None;
        }
        self.deadlines(changes, now).await;
    }

    /// Reads the inbox's window and the fingerprints of its notifications.
    async fn fill_window(&mut self) {
        let after = self.last;
        let Some((window, prints)) = read(&self.store, move |r| window_at(r, after)).await else {
            return;
        };
        self.window = Some(window);
        self.prints = prints;
    }

    /// Broadcasts each notification of the window whose fingerprint changed.
    async fn window_changes(&mut self, changes: &Changes) {
        let Some(window) = &self.window else {
            return;
        };
        let ids: Vec<(String, Option<String>)> = window
            .iter()
            .map(|(_, id, session)| (id.clone(), session.clone()))
            .collect();
        let Some(now) = read(&self.store, move |r| {
            let mut now = Vec::with_capacity(ids.len());
            for (id, session) in ids {
                let n = r.notification(&id)?;
                now.push((id, session, fingerprint(n.as_ref())));
            }
            Ok(now)
        })
        .await
        else {
            return;
        };
        for (id, session, print) in now {
            if self.prints.insert(id.clone(), print) != Some(print) {
                let _ = changes.send(Update::Changed { id, session, print });
            }
        }
    }

    /// Adds a new message's notification to the window, dropping the oldest beyond it.
    fn add_to_window(&mut self, m: &InboxMessage, print: u64) {
        let Some(window) = &mut self.window else {
            return;
        };
        if m.is_post() {
            return;
        }
        window.push_back((m.id, m.notification_id.clone(), m.session.clone()));
        self.prints.insert(m.notification_id.clone(), print);
        let oldest = self.last.saturating_sub(INBOX_WINDOW);
        while let Some((id, notification, _)) = window.front().cloned()
            && id <= oldest
        {
            window.pop_front();
            if !window.iter().any(|(_, n, _)| *n == notification) {
                self.prints.remove(&notification);
            }
        }
    }

    /// Broadcasts the messages appended since the last look.
    async fn messages(&mut self, changes: &Changes, appended: bool) {
        if !appended && read_mark(&self.inbox_file).is_none_or(|mark| mark <= self.last) {
            return;
        }
        let after = self.last;
        let Some(messages) = read(&self.store, move |r| {
            let msgs = r.inbox_after(after, READ_AT_ONCE, &|_| true)?;
            let mut out = Vec::with_capacity(msgs.len());
            for m in msgs {
                let print = match m.is_post() {
                    true => 0,
                    false => fingerprint(r.notification(&m.notification_id)?.as_ref()),
                };
                out.push((m, print));
            }
            Ok(out)
        })
        .await
        else {
            return;
        };
        for (m, print) in messages {
            self.last = self.last.max(m.id);
            self.add_to_window(&m, print);
            let _ = changes.send(Update::Message(Arc::new(m)));
        }
    }

    /// Broadcasts the notifications whose deadline passed since the last look, and reads
    /// when the next one is.
    async fn deadlines(&mut self, changes: &Changes, now: i64) {
        if now > self.checked_until && self.next.is_none_or(|n| n.is_some_and(|at| at <= now)) {
            let after = self.checked_until;
            let found = read(&self.store, move |r| {
                let jobs = r.jobs_between(after, now, DEADLINES_AT_ONCE)?;
                let mut due = Vec::new();
                for (_, job) in &jobs {
                    let Some(id) = job.strip_prefix("watchdog:") else {
                        continue;
                    };
                    if let Some(n) = r.notification(id)?
                        && let Some(n) = crate::notify::due::as_escalated(n, now)
                    {
                        let session = crate::notify::due::entry(&n).session;
                        let print = fingerprint(Some(&n));
                        due.push((n.id, session, print));
                    }
                }
                let full = jobs.len() == DEADLINES_AT_ONCE;
                Ok((due, full.then(|| jobs.last().map(|(at, _)| *at)).flatten()))
            })
            .await;
            if let Some((due, stopped_at)) = found {
                for (id, session, print) in due {
                    let _ = changes.send(Update::Changed { id, session, print });
                }
                // A full page: go on after its last deadline at the next look.
                self.checked_until = stopped_at.unwrap_or(now);
                self.next = None;
            }
        }
        if self.next.is_none() {
            let after = self.checked_until;
            self.next = Some(next_deadline(&self.store, after).await);
        }
    }
}

/// The notifications of the inbox's window ending at message `last`, oldest first: (message,
/// notification, thread), and the fingerprint of each notification.
type Window = (
    VecDeque<(u64, String, Option<String>)>,
    HashMap<String, u64>,
);

pub(crate) fn window_at(
    r: &dyn crate::storage::ReadTx,
    last: u64,
) -> crate::storage::Result<Window> {
    let after = last.saturating_sub(INBOX_WINDOW);
    let msgs = r.inbox_after(after, INBOX_WINDOW as usize, &|m| !m.is_post())?;
    let mut prints = HashMap::new();
    for m in &msgs {
        let n = r.notification(&m.notification_id)?;
        prints.insert(m.notification_id.clone(), fingerprint(n.as_ref()));
    }
    let window = msgs
        .into_iter()
        .map(|m| (m.id, m.notification_id, m.session))
        .collect::<VecDeque<_>>();
    Ok((window, prints))
}

/// What a session saw of the inbox's window when it subscribed to a view of it: each
/// notification's fingerprint and thread.
pub(crate) fn baseline(r: &dyn crate::storage::ReadTx) -> crate::storage::Result<Baseline> {
    let (window, prints) = window_at(r, r.inbox_last()?)?;
    Ok(window
        .into_iter()
        .map(|(_, id, session)| {
            let print = prints.get(&id).copied().unwrap_or(0);
            (id, (print, session))
        })
        .collect())
}

/// A session's [`baseline`]: notification → (fingerprint, thread).
pub(crate) type Baseline = HashMap<String, (u64, Option<String>)>;

/// The inbox mark file's id; `None` when it is missing or being replaced.
fn read_mark(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}
