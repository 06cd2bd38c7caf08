//! Wake-ups between nodes: `LISTEN/NOTIFY`.
//!
//! A commit that leaves work free for any node (an invocation queued without a lease: a
//! retry, an approval answered, work given back by a node that stops) sends `pap_work`; one
//! that appends to the inbox sends `pap_inbox` (see `PgStore::write_session`). PostgreSQL
//! delivers a notification only if its transaction commits, and in commit order.
//!
//! Each listening process keeps one connection of its own, outside the pool, on a thread
//! that waits for notifications and calls back. A connection that breaks (the database
//! restarted, the network cut) is opened again with a backoff; since notifications sent
//! meanwhile are lost, every reconnection calls back for every kind of change, so the
//! listener looks at everything once. Rescans stay in place besides: a notification speeds
//! things up, it is never the only way work is found.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use super::pool::Dialer;
use pap_storage::Change;

/// The channels, as the notifying commits name them.
pub(super) const WORK_CHANNEL: &str = "pap_work";
pub(super) const INBOX_CHANNEL: &str = "pap_inbox";
pub(super) const NOTIFICATION_CHANNEL: &str = "pap_notification";

/// How often the thread looks at whether it should stop.
const LOOK_EVERY: Duration = Duration::from_millis(500);
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BACKOFF_MOST: Duration = Duration::from_secs(5);

/// The listening thread; it ends soon after this is dropped.
pub(super) struct Listening {
    stop: Arc<AtomicBool>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts listening on every channel, calling `on` for each notification.
pub(super) fn start(dialer: Dialer, on: Box<dyn Fn(Change) + Send>) -> std::io::Result<Listening> {
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    std::thread::Builder::new()
        .name("pap-listen".into())
        .spawn(move || run(&dialer, &*on, &stopping))?;
    Ok(Listening { stop })
}

fn run(dialer: &Dialer, on: &dyn Fn(Change), stop: &AtomicBool) {
    let mut backoff = BACKOFF_FIRST;
    while !stop.load(Ordering::SeqCst) {
        let listening = dialer.connect().ok().and_then(|mut client| {
            client
                .batch_execute(&format!(
                    "LISTEN {WORK_CHANNEL}; LISTEN {INBOX_CHANNEL}; LISTEN {NOTIFICATION_CHANNEL}"
                ))
                .ok()
                .map(|()| client)
        });
        let Some(mut client) = listening else {
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(BACKOFF_MOST);
            continue;
        };
        backoff = BACKOFF_FIRST;
        // Whatever was sent while this process did not listen is lost: look once at all.
        on(Change::Work);
        on(Change::Inbox);
        on(Change::Notifications);
        while !stop.load(Ordering::SeqCst) {
            let next = client.notifications().timeout_iter(LOOK_EVERY).next();
            match next {
                Ok(Some(note)) => match note.channel() {
                    WORK_CHANNEL => on(Change::Work),
                    INBOX_CHANNEL => on(Change::Inbox),
                    NOTIFICATION_CHANNEL => on(Change::Notifications),
                    _ => {}
                },
                Ok(None) if !client.is_closed() => {}
                _ => break,
            }
        }
    }
}
