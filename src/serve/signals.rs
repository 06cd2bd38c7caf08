//! Serve's signals: SIGTERM and SIGINT stop it (no new work is claimed, running agents get
//! their grace period), SIGHUP reloads the manifests. Each becomes a [`Wake`] for the loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;

use super::Wake;

pub(super) fn signals(rt: &tokio::runtime::Runtime, wake: Sender<Wake>, stop: Arc<AtomicBool>) {
    use tokio::signal::unix::{SignalKind, signal};
    rt.spawn(async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::error!("cannot install signal handlers");
            return;
        };
        loop {
            let which = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = hup.recv() => {
                    let _ = wake.send(Wake::Reload);
                    continue;
                }
            };
            tracing::info!(signal = which, "stopping: no new work is claimed");
            stop.store(true, Ordering::SeqCst);
            let _ = wake.send(Wake::Stop);
        }
    });
}
