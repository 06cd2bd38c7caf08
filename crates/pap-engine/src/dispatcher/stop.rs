//! `pap dispatch` on SIGINT or SIGTERM: no new event is taken and no new run starts; running
//! agents get the grace period, then are killed with their process groups and left queued.
//! A second signal ends the grace period at once.

use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The stop a signal asked for.
#[derive(Debug, Clone, Copy)]
pub struct Stopped {
    pub signal: &'static str,
    /// 128 + the signal's number: what the shell reports for a process the signal ended.
    pub exit_code: u8,
    /// When running agents are killed.
    pub deadline: Instant,
}

#[derive(Clone)]
pub struct Stop {
    rx: watch::Receiver<Option<Stopped>>,
}

impl Stop {
    /// Listens for SIGINT and SIGTERM on `rt` from now on.
    pub fn on_signals(rt: &tokio::runtime::Runtime, grace: Duration) -> anyhow::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        let (tx, rx) = watch::channel(None);
        let _entered = rt.enter();
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        rt.spawn(async move {
            loop {
                let (signal, exit_code) = tokio::select! {
                    _ = term.recv() => ("SIGTERM", 143),
                    _ = int.recv() => ("SIGINT", 130),
                };
                let now = Instant::now();
                tx.send_modify(|stop| {
                    *stop = Some(match *stop {
                        None => {
                            crate::say!(
                                "pap dispatch: {signal}: no new events; running agents have {}s to finish",
                                grace.as_secs_f64()
                            );
                            Stopped {
                                signal,
                                exit_code,
                                deadline: now + grace,
                            }
                        }
                        Some(first) => Stopped {
                            deadline: now,
                            ..first
                        },
                    })
                });
            }
        });
        Ok(Stop { rx })
    }

    /// The stop asked for, if any.
    pub fn requested(&self) -> Option<Stopped> {
        *self.rx.borrow()
    }

    /// Resolves once a stop was asked for and its grace period is over.
    pub(crate) async fn grace_over(&mut self) {
        loop {
            let deadline = self.rx.borrow_and_update().map(|s| s.deadline);
            let changed = match deadline {
                None => self.rx.changed().await,
                Some(at) => tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => return,
                    changed = self.rx.changed() => changed,
                },
            };
            if changed.is_err() {
                // No more signals can come: only a deadline already set can end this.
                match deadline {
                    Some(at) => return tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            }
        }
    }
}
