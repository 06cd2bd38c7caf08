//! Spans of what pap does, for OpenTelemetry traces. The engine makes spans only
//! through this module, on the `opentelemetry` API's global tracer, which the composition
//! root installs when traces are exported (see `pap::telemetry`).
//!
//! Off by default, and then free: until [`enable`] is called, [`start`] returns an empty
//! [`Span`] without touching the API (no span, no context, no attribute is made), and
//! [`spans_started`] stays 0, which a test checks through the real binary.
//!
//! What a span carries is pap's own: ids, names, outcomes, counts. Free text that may quote
//! an event or an agent (a reason, an error) is passed in already redacted by the caller.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue, global};

use crate::trace_context::TraceContext;

pub use opentelemetry::KeyValue as Attr;
pub use opentelemetry::trace::SpanKind as Kind;

static ENABLED: AtomicBool = AtomicBool::new(false);
static STARTED: AtomicU64 = AtomicU64::new(0);

/// The tracer's name (the instrumentation scope).
const SCOPE: &str = "pap";

/// Spans are made from now on (the root installed a tracer provider).
pub fn enable() {
    ENABLED.store(true, Ordering::Release);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// Spans started by this process.
pub fn spans_started() -> u64 {
    STARTED.load(Ordering::Relaxed)
}

/// The process's HTTP client, for the exporter: its TLS and CA certificates are pap's own.
pub fn http_client() -> reqwest::Client {
    crate::http_client::shared()
}

/// What a new span is a child of.
pub enum Parent<'a> {
    /// A context from elsewhere: an event's `traceparent`, or one stored with an invocation.
    Remote(Option<&'a TraceContext>),
    /// A span of this process.
    Span(&'a Span),
}

/// A span, or nothing when traces are off. Ended when dropped.
pub struct Span {
    cx: Option<Context>,
}

impl Span {
    /// No span (traces are off, or its parent was none).
    pub fn none() -> Span {
        Span { cx: None }
    }

    pub fn is_recording(&self) -> bool {
        self.cx.is_some()
    }

    /// This span's context, to pass on (an invocation's record, an emitted event, a
    /// `traceparent` header, a command agent's `TRACEPARENT`).
    pub fn context(&self) -> Option<TraceContext> {
        let cx = self.cx.as_ref()?;
        let span = cx.span();
        let sc = span.span_context();
        if !sc.is_valid() {
            return None;
        }
        let state = sc.trace_state().header();
        Some(TraceContext {
            trace_id: sc.trace_id().to_string(),
            parent_id: sc.span_id().to_string(),
            flags: sc.trace_flags().to_u8(),
            tracestate: (!state.is_empty()).then_some(state),
        })
    }

    pub fn set(&self, attr: KeyValue) {
        if let Some(cx) = &self.cx {
            cx.span().set_attribute(attr);
        }
    }

    pub fn set_all(&self, attrs: impl IntoIterator<Item = KeyValue>) {
        if let Some(cx) = &self.cx {
            cx.span().set_attributes(attrs);
        }
    }

    pub fn event(&self, name: impl Into<Cow<'static, str>>, attrs: Vec<KeyValue>) {
        if let Some(cx) = &self.cx {
            cx.span().add_event(name, attrs);
        }
    }

    /// Marks the span failed, with `error.type` and a (redacted) description.
    pub fn fail(&self, error_type: &str, description: &str) {
        if let Some(cx) = &self.cx {
            let span = cx.span();
            span.set_attribute(KeyValue::new("error.type", error_type.to_owned()));
            span.set_status(Status::error(description.to_owned()));
        }
    }

    /// Ends the span now (dropping it does the same).
    pub fn end(self) {}
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(cx) = &self.cx {
            cx.span().end();
        }
    }
}

/// Starts a span named `name()` under `parent`, or returns [`Span::none`] when traces are
/// off. Its name and `attrs` are made only when they are on: a decision with traces off
/// allocates nothing for them.
pub fn start(
    name: impl FnOnce() -> String,
    parent: Parent<'_>,
    kind: SpanKind,
    attrs: impl FnOnce() -> Vec<KeyValue>,
) -> Span {
    start_with(name, parent, kind, &[], attrs)
}

/// As [`start`], an internal span linked to `links`: a batch's run continues its first
/// event's trace and links every other event's decision (span links, as OpenTelemetry
/// models one operation started by several).
pub fn start_linked(
    name: impl FnOnce() -> String,
    parent: Parent<'_>,
    links: &[TraceContext],
    attrs: impl FnOnce() -> Vec<KeyValue>,
) -> Span {
    start_with(name, parent, SpanKind::Internal, links, attrs)
}

fn start_with(
    name: impl FnOnce() -> String,
    parent: Parent<'_>,
    kind: SpanKind,
    links: &[TraceContext],
    attrs: impl FnOnce() -> Vec<KeyValue>,
) -> Span {
    if !enabled() {
        return Span::none();
    }
    let parent_cx = match parent {
        Parent::Remote(Some(tc)) => remote(tc),
        Parent::Remote(None) => Context::new(),
        Parent::Span(span) => match &span.cx {
            Some(cx) => cx.clone(),
            None => Context::new(),
        },
    };
    STARTED.fetch_add(1, Ordering::Relaxed);
    let tracer = global::tracer(SCOPE);
    let links: Vec<Link> = links
        .iter()
        .filter_map(|l| {
            let sc = remote_span_context(l)?;
            Some(Link::with_context(sc))
        })
        .collect();
    let span = tracer
        .span_builder(name())
        .with_kind(kind)
        .with_attributes(attrs())
        .with_links(links)
        .start_with_context(&tracer, &parent_cx);
    Span {
        cx: Some(parent_cx.with_span(span)),
    }
}

/// Records a span that already happened, from `start_ms` to `end_ms` (ms since the epoch, on
/// pap's clock): the wait for a person's answer, known only once it is over.
pub fn record(
    name: impl FnOnce() -> String,
    parent: Option<&TraceContext>,
    (start_ms, end_ms): (i64, i64),
    attrs: impl FnOnce() -> Vec<KeyValue>,
) {
    if !enabled() {
        return;
    }
    let at = |ms: i64| {
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    };
    STARTED.fetch_add(1, Ordering::Relaxed);
    let tracer = global::tracer(SCOPE);
    let parent_cx = parent.map_or_else(Context::new, remote);
    let mut span = tracer
        .span_builder(name())
        .with_kind(SpanKind::Internal)
        .with_start_time(at(start_ms))
        .with_attributes(attrs())
        .start_with_context(&tracer, &parent_cx);
    span.end_with_timestamp(at(end_ms.max(start_ms)));
}

/// The API's context of a context from elsewhere (already validated by `trace_context`).
fn remote(tc: &TraceContext) -> Context {
    match remote_span_context(tc) {
        Some(sc) => Context::new().with_remote_span_context(sc),
        None => Context::new(),
    }
}

fn remote_span_context(tc: &TraceContext) -> Option<SpanContext> {
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&tc.trace_id),
        opentelemetry::trace::SpanId::from_hex(&tc.parent_id),
    ) else {
        return None;
    };
    let state = tc
        .tracestate
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(tc.flags) & TraceFlags::SAMPLED,
        true,
        state,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn while_off_nothing_is_made() {
        // `enable` is never called in the engine's unit tests.
        let mut made = false;
        let span = start(
            || "x".into(),
            Parent::Remote(None),
            SpanKind::Internal,
            || {
                made = true;
                Vec::new()
            },
        );
        assert!(!made && !span.is_recording());
        assert_eq!(span.context(), None);
        assert_eq!(spans_started(), 0);
    }
}
