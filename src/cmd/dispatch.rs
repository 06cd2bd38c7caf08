//! `pap dispatch`: read events, decide them, run agents, print one line per event.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Outcome;
use super::{context, webhook_body};
use crate::adapter::{Adapter, events_of_body};
use crate::cli::{Cli, DispatchArgs};
use crate::dispatcher::{Dispatcher, Format, GROUP_MAX, GROUP_WEIGHT_MAX, Pending, Stop, Suspend};
use crate::event::Invalid;
use crate::event::input::{self, Item, Location, Sink, Source};
use crate::pipeline::{Options, Pipeline};
use crate::term::Paint;

enum Message {
    Events(Vec<Pending>),
    Unreadable(String, std::io::Error),
}

/// Events travel from the reading thread in batches of at most this many: one channel
/// hand-off per batch, and few enough in flight that memory is reused while still warm.
const BATCH: usize = 256;

/// A batch also goes once its events weigh this much (see [`Pending::weight`]): an event that
/// matches many triggers carries a prepared verdict (and a reason) for each.
const BATCH_WEIGHT: usize = GROUP_WEIGHT_MAX / 16;

/// Batches read ahead of the deciding thread: enough to keep it busy, few enough that the
/// events waiting (parsed and prepared) weigh at most half a group.
const BATCHES_AHEAD: usize = 8;

/// Parses, checks and prepares events on the reading thread (see [`Pipeline::prepare`]),
/// handing them over in batches; a batch goes as soon as the input has nothing more ready.
struct Batcher<'p> {
    pipeline: Pipeline<'p>,
    batch: Vec<Pending>,
    /// What `batch` weighs.
    weight: usize,
    tx: mpsc::SyncSender<Message>,
    /// Decided events coming back, to be freed here (see `Dispatcher::recycle_events`).
    back: mpsc::Receiver<Vec<serde_json::Value>>,
}

impl Batcher<'_> {
    fn flush(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            self.weight = 0;
            // A closed channel means the deciding thread stopped; its error is reported there.
            let _ = self.tx.send(Message::Events(batch));
        }
        while let Ok(done) = self.back.try_recv() {
            drop(done);
        }
    }
}

impl Sink for Batcher<'_> {
    fn item(&mut self, item: Item) {
        let prepared = item.event.as_ref().ok().map(|e| self.pipeline.prepare(e));
        let pending = Pending {
            input: item.loc,
            event: item.event,
            emitted: false,
            prepared,
        };
        self.weight += pending.weight();
        self.batch.push(pending);
        if self.batch.len() >= BATCH || self.weight >= BATCH_WEIGHT {
            self.flush();
        }
    }

    fn caught_up(&mut self) {
        self.flush();
    }
}

pub(super) fn run(cli: &Cli, args: &DispatchArgs) -> anyhow::Result<Outcome> {
    let mut runtime = context::runtime(cli, args.dry_run)?;
    if let Some(at) = args.at {
        // Only with --dry-run (clap enforces it): nothing decided "at" another time is kept.
        runtime.clock = crate::clock::Clock::fake(at);
    }
    // With --adapter, each file is one webhook body that adapter maps.
    let adapter = match &args.adapter {
        Some(name) => match crate::adapter::named(&runtime.project.config.adapters, name) {
            Ok(adapter) => Some(adapter.clone()),
            Err(e) => {
                crate::say!("error: {e:#}");
                return Ok(Outcome::Usage);
            }
        },
        None => None,
    };
    let max_body = runtime.project.config.listen.max_body_bytes;
    let grace = context::grace(args.grace, runtime.project.config.serve.grace_period)?;
    let rt = context::tokio_runtime()?;
    // Traces, when an endpoint is configured (not for a dry run: nothing it decides is kept).
    // Declared after the runtime, so it is dropped (flushed) while the runtime still runs.
    let _traces = match args.dry_run {
        false => crate::telemetry::install(&runtime.project.config.traces, rt.handle()),
        true => None,
    };
    let stop = Stop::on_signals(&rt, grace)?;
    let options = Options {
        no_run: args.no_run,
        dry_run: args.dry_run,
        explain: args.explain,
        leave_blocked: false,
    };
    let sources: Vec<Source> = args.files.iter().map(|f| Source::parse(f)).collect();
    let total: Option<u64> = sources.iter().map(Source::size).sum();
    let format = if args.json {
        Format::Json
    } else {
        Format::Human(Paint::for_stdout())
    };
    let stdout = Box::new(std::io::BufWriter::new(std::io::stdout()));
    let progress = Progress::new(total);
    let suspend: Suspend = match progress.bar.clone() {
        Some(bar) => Box::new(move |f| bar.suspend(&mut *f)),
        None => Box::new(|f| f()),
    };
    let mut dispatcher = Dispatcher::new(
        &runtime,
        options,
        &rt,
        args.jobs.into(),
        format,
        stdout,
        suspend,
    );
    dispatcher.stop_on(stop.clone());

    let consumed = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::sync_channel::<Message>(BATCHES_AHEAD);
    let (back_tx, back_rx) = mpsc::sync_channel::<Vec<serde_json::Value>>(BATCHES_AHEAD / 2);
    let mut done = Vec::with_capacity(BATCH);
    dispatcher.recycle_events(move |event| {
        done.push(event);
        if done.len() >= BATCH {
            let full = std::mem::replace(&mut done, Vec::with_capacity(BATCH));
            // When the reader is behind (or gone), these are freed here instead.
            let _ = back_tx.try_send(full);
        }
    });
    let max_bytes = runtime.project.config.max_event_bytes;
    // A webhook body is received now (`refire_after` counts to it), as serve would.
    let now = runtime.clock.now_ms();
    let reader = {
        let consumed = consumed.clone();
        let project = runtime.project.clone();
        std::thread::spawn(move || {
            // Parsing, validation and the store-free stages happen here, beside the thread
            // that decides.
            let mut batcher = Batcher {
                pipeline: Pipeline::new(&project, options),
                batch: Vec::with_capacity(BATCH),
                weight: 0,
                tx,
                back: back_rx,
            };
            for source in &sources {
                let read = match &adapter {
                    Some(adapter) => read_webhook(
                        source,
                        adapter,
                        max_body,
                        max_bytes,
                        now,
                        &consumed,
                        &mut batcher,
                    ),
                    None => input::read(source, max_bytes, &consumed, &mut batcher),
                };
                batcher.flush();
                if let Err(err) = read {
                    let _ = batcher.tx.send(Message::Unreadable(source.name(), err));
                }
            }
        })
    };

    dispatcher.expire_approvals()?;
    let mut unreadable = false;
    // Events received and not decided yet: what a full group left of its last batch.
    let mut batch = Vec::new().into_iter();
    loop {
        if stop.requested().is_some() {
            // Events not decided yet are not taken: nothing is recorded for them.
            break;
        }
        if batch.len() == 0 {
            // Woken now and then to see whether a signal asked to stop.
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Message::Events(b)) => batch = b.into_iter(),
                Ok(Message::Unreadable(name, err)) => {
                    // Nothing to decide: no transaction for it.
                    unreadable = report_unreadable(&name, &err);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // A group is whatever is ready now, up to GROUP_MAX events and GROUP_WEIGHT_MAX of
        // reports: a burst commits together, a trickle commits event by event. It is pulled
        // from the channel inside the transaction, so each event is dropped once decided.
        let (mut events, mut weight) = (0, 0);
        let group = std::iter::from_fn(|| {
            loop {
                if events >= GROUP_MAX || weight >= GROUP_WEIGHT_MAX {
                    return None;
                }
                if let Some(p) = batch.next() {
                    events += 1;
                    weight += p.weight();
                    return Some(p);
                }
                match rx.try_recv().ok()? {
                    Message::Events(b) => batch = b.into_iter(),
                    Message::Unreadable(name, err) => unreadable = report_unreadable(&name, &err),
                }
            }
        });
        dispatcher.process(group)?;
        progress.step(events as u64, consumed.load(Ordering::Relaxed));
    }
    progress.finish();
    if dispatcher.stopped().is_none() {
        reader.join().expect("reader thread");
        dispatcher.settle_notifications()?;
    }
    // Else the reader may be waiting on an input that never ends: it goes with the process,
    // and internal turns and sinks are left to `pap serve` or the next command.
    // When no input could be read at all, the errors said everything: a summary of nothing
    // after them would read as if something had happened.
    dispatcher.finish(!(unreadable && dispatcher.tally.events == 0))?;
    let stopped = dispatcher.stopped();
    if (args.no_run || stopped.is_some()) && dispatcher.tally.outcomes.contains_key("queued") {
        // A running serve picks the queued work up at once instead of at its next scan.
        crate::serve::control::wake(&context::state_dir(cli, &runtime.project));
    }
    if let Some(stopped) = stopped {
        return Ok(Outcome::Signalled(stopped.exit_code));
    }

    let t = &dispatcher.tally;
    Ok(if unreadable {
        Outcome::Failure
    } else if t.invalid > 0 {
        Outcome::InvalidEvent
    } else if t.failed > 0 {
        Outcome::AgentFailed
    } else {
        Outcome::Success
    })
}

/// One webhook body in `source`, mapped by `adapter` to the events a post of it makes (a body
/// that makes none is one invalid event, named by the file), handed to `sink`.
fn read_webhook(
    source: &Source,
    adapter: &Adapter,
    max_body: u64,
    max_event: u64,
    now: i64,
    consumed: &AtomicU64,
    sink: &mut dyn Sink,
) -> std::io::Result<()> {
    let body = webhook_body::read(source, max_body)?;
    consumed.fetch_add(body.len() as u64, Ordering::Relaxed);
    let name: Arc<str> = source.name().into();
    let at = |index| Location {
        source: name.clone(),
        line: None,
        index,
    };
    match events_of_body(adapter, &body, max_event, now) {
        Ok(events) => {
            for made in events {
                sink.item(Item {
                    loc: at(made.index),
                    event: made.event,
                });
            }
        }
        Err(why) => sink.item(Item {
            loc: at(None),
            event: Err(Invalid::new(why.to_string())),
        }),
    }
    sink.caught_up();
    Ok(())
}

/// Says an input could not be read (its events so far still count); returns true.
fn report_unreadable(name: &str, err: &std::io::Error) -> bool {
    crate::say!("error: cannot read {name}: {err}");
    true
}

/// A progress bar on stderr for long streams: only on a terminal, and only once a stream has
/// taken longer than a moment (short runs stay quiet).
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    total: Option<u64>,
    shown: std::cell::Cell<bool>,
    events: std::cell::Cell<u64>,
}

impl Progress {
    fn new(total: Option<u64>) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(bytes) => {
                    ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::hidden())
                }
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()),
            };
            let style = match total {
                Some(_) => "{bar:30} {bytes}/{total_bytes} {msg} ({elapsed})",
                None => "{spinner} {msg} ({elapsed})",
            };
            bar.set_style(ProgressStyle::with_template(style).expect("valid template"));
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            total,
            shown: false.into(),
            events: 0.into(),
        }
    }

    fn step(&self, events: u64, bytes: u64) {
        let Some(bar) = &self.bar else { return };
        self.events.set(self.events.get() + events);
        if !self.shown.get() && self.started.elapsed() > Duration::from_millis(500) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown.set(true);
        }
        if self.total.is_some() {
            bar.set_position(bytes);
        } else {
            bar.tick();
        }
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} events, {:.0}/s",
            self.events.get(),
            self.events.get() as f64 / secs
        ));
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
