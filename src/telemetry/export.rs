//! The tracer provider: spans go through a bounded queue of pap's own (so a drop is counted:
//! the SDK's batch processor keeps its count private) into the SDK's batch processor, whose
//! thread exports them over OTLP HTTP/protobuf with pap's HTTP client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};

use super::{DROPPED, FAILED_EXPORTS};
use crate::manifest::compiled::TraceConfig;

/// The SDK's batch processor exports on a thread of its own, with no Tokio reactor: each
/// request runs on pap's runtime, and only its outcome is awaited there.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    rt: tokio::runtime::Handle,
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT` (ms), else 10 s.
    timeout: Duration,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (client, request) = (self.client.clone(), reqwest::Request::try_from(request)?);
        let limit = self.timeout;
        self.rt
            .spawn(async move {
                // The exporter sets no time limit on a client it did not build: a collector
                // that takes the connection and never answers must not hold the export thread.
                let answer = tokio::time::timeout(limit, client.execute(request))
                    .await
                    .map_err(|_| format!("the collector did not answer within {limit:?}"))??;
                let mut out = Response::builder().status(answer.status());
                if let Some(headers) = out.headers_mut() {
                    *headers = answer.headers().clone();
                }
                Ok::<_, HttpError>(out.body(answer.bytes().await?)?)
            })
            .await?
    }
}

/// Spans handed to the batch processor and not yet taken by the exporter.
#[derive(Debug, Default)]
struct InFlight(AtomicUsize);

/// Keeps the queue's bound itself, so that every drop is counted; the batch processor's own
/// queue is made larger, so it never drops.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    in_flight: Arc<InFlight>,
    limit: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx)
    }

    fn on_end(&self, span: SpanData) {
        if self.in_flight.0.fetch_add(1, Ordering::AcqRel) >= self.limit {
            self.in_flight.0.fetch_sub(1, Ordering::AcqRel);
            DROPPED.fetch_add(1, Ordering::Relaxed);
        } else {
            self.inner.on_end(span)
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

/// Takes spans off the bound as their batch leaves, and counts a batch not taken.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    in_flight: Arc<InFlight>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.in_flight.0.fetch_sub(batch.len(), Ordering::AcqRel);
        let result = self.inner.export(batch).await;
        if result.is_err() {
            FAILED_EXPORTS.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

/// The provider; `endpoint` only when the variables do not name one (a setting made here
/// would win over them).
pub(super) fn provider(
    config: &TraceConfig,
    endpoint: Option<&str>,
    rt: tokio::runtime::Handle,
) -> anyhow::Result<SdkTracerProvider> {
    let timeout = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse::<u64>().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis);
    let client = OnRuntime {
        client: pap_engine::telemetry::http_client(),
        rt,
        timeout,
    };
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(client);
    if let Some(url) = endpoint {
        exporter = exporter.with_endpoint(url);
    }
    let in_flight = Arc::new(InFlight::default());
    let exporter = Counted {
        inner: exporter.build()?,
        in_flight: in_flight.clone(),
    };
    let batch = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(config.max_queue.saturating_mul(2).max(2))
                .build(),
        )
        .build();
    let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    let named_by_env = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| {
            a.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    if !named_by_env {
        resource = resource.with_service_name(config.service_name.clone());
    }
    Ok(SdkTracerProvider::builder()
        .with_span_processor(Bounded {
            inner: batch,
            in_flight,
            limit: config.max_queue,
        })
        .with_resource(resource.build())
        .build())
}
