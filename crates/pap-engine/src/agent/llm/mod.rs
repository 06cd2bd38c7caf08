//! One attempt of an `anthropic` or `openai` agent: the prompt, the model turns, the tool loop
//! over MCP, the limits, and the final answer checked against `output.schema`.

mod anthropic;
mod chat;
mod http;
mod openai;
mod prompt;
mod tools;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

use super::{DEFAULT_MAX_RUNTIME, Failure, Runtime, output};
use crate::domain::{Invocation, Transcript, Turn};
use crate::manifest::compiled::{Agent, LlmModel, ModelSpec};
use crate::telemetry;
use crate::text::clip as truncate;
use chat::{Reply, Stop};

/// The model's text is kept in the transcript up to this many characters.
const TEXT_KEEP: usize = 4000;

/// Runs one attempt. The transcript comes back whatever happened, for the invocation record.
pub(super) async fn attempt(
    rt: &Runtime,
    inv: &Invocation,
    agent: &Agent,
    span: &telemetry::Span,
) -> (Result<Value, Failure>, Transcript) {
    let (provider, model) = match &agent.model {
        ModelSpec::Anthropic(m) => (Provider::Anthropic, m),
        ModelSpec::Openai(m) => (Provider::Openai, m),
        ModelSpec::Command { .. } => unreachable!("command agents do not come here"),
    };
    let transcript = Arc::new(Mutex::new(Transcript {
        provider: provider.name().into(),
        model: model.model_id.clone(),
        ..Transcript::default()
    }));
    let limit = agent.max_runtime.unwrap_or(DEFAULT_MAX_RUNTIME);
    let run = Attempt {
        rt,
        inv,
        agent,
        model,
        provider,
        transcript: transcript.clone(),
        deadline_ms: rt.clock.now_ms() + limit.as_millis() as i64,
        span,
    };
    // Wall clock for the whole attempt: connecting servers, every turn and every tool call.
    let result = match tokio::time::timeout(limit, run.run()).await {
        Ok(result) => result,
        Err(_) => Err(Failure {
            reason: format!(
                "exceeded limits.max_runtime_seconds ({} s)",
                limit.as_secs_f64()
            ),
            retry: true,
        }),
    };
    let transcript = transcript.lock().expect("transcript").clone();
    (result, transcript)
}

#[derive(Clone, Copy)]
enum Provider {
    Anthropic,
    Openai,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
        }
    }
}

enum Conversation {
    Anthropic(anthropic::Conversation),
    Openai(openai::Conversation),
}

struct Attempt<'a> {
    rt: &'a Runtime,
    inv: &'a Invocation,
    agent: &'a Agent,
    model: &'a LlmModel,
    provider: Provider,
    transcript: Arc<Mutex<Transcript>>,
    deadline_ms: i64,
    /// The attempt's span, which each request's span is a child of.
    span: &'a telemetry::Span,
}

impl Attempt<'_> {
    async fn run(&self) -> Result<Value, Failure> {
        // Checked before anything starts: no server is spawned for an attempt that cannot run.
        let key = std::env::var(&self.model.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| Failure {
                reason: format!(
                    "the API key variable {} is not set in {} (model.api_key_env)",
                    self.model.api_key_env, self.rt.environment
                ),
                retry: false,
            })?;
        let (url, headers, mut conversation) = self.setup(&key)?;
        // The attempt's span, or with traces off the invocation's context passed on.
        let trace = self.span.context().or_else(|| self.inv.trace.clone());
        let mut session = tools::Session::open(self.rt, self.agent, self.inv, trace.as_ref())
            .await
            .map_err(|e| Failure {
                reason: e.reason,
                retry: !e.permanent,
            })?;
        let result = self.turns(&url, headers, &mut conversation, &session).await;
        session.close().await;
        result
    }

    fn setup(&self, key: &str) -> Result<(String, HeaderMap, Conversation), Failure> {
        let notifications = crate::notify::queue::prompt_block(&self.inv.notifications);
        let first = prompt::first_message(&prompt::Context {
            trigger: &self.inv.trigger,
            invocation: &self.inv.id,
            attempt: self.inv.attempts,
            event: &self.inv.event,
            notifications: &notifications,
            output: &self.agent.output,
        });
        let system = self.agent.system_prompt.as_deref();
        let mut headers = HeaderMap::new();
        let secret = |value: String| {
            let mut v = HeaderValue::from_str(&value).map_err(|_| Failure {
                reason: format!(
                    "the API key in {} is not a valid header value",
                    self.model.api_key_env
                ),
                retry: false,
            })?;
            v.set_sensitive(true);
            Ok::<_, Failure>(v)
        };
        Ok(match self.provider {
            Provider::Anthropic => {
                let base = self
                    .model
                    .base_url
                    .as_deref()
                    .unwrap_or(anthropic::DEFAULT_BASE_URL);
                headers.insert("x-api-key", secret(key.to_owned())?);
                headers.insert(
                    "anthropic-version",
                    HeaderValue::from_static(anthropic::API_VERSION),
                );
                (
                    anthropic::url(base),
                    headers,
                    Conversation::Anthropic(anthropic::Conversation::new(first)),
                )
            }
            Provider::Openai => {
                let base = self.model.base_url.as_deref();
                headers.insert("authorization", secret(format!("Bearer {key}"))?);
                (
                    openai::url(base.unwrap_or(openai::DEFAULT_BASE_URL)),
                    headers,
                    Conversation::Openai(openai::Conversation::new(system, first, base.is_none())),
                )
            }
        })
    }

    async fn turns(
        &self,
        url: &str,
        headers: HeaderMap,
        conversation: &mut Conversation,
        session: &tools::Session,
    ) -> Result<Value, Failure> {
        let client = crate::http_client::shared();
        let max_calls = self.agent.max_tool_calls;
        let mut calls_made: u64 = 0;
        loop {
            // A cancelled invocation takes no further turn (nor the tool calls it would ask
            // for): checked before each request to the model.
            if !self.rt.still_holds(self.inv) {
                return Err(Failure {
                    reason: "stopped: the invocation was cancelled while it ran".into(),
                    retry: false,
                });
            }
            // A run with a token or money budget stays within what it reserved.
            let (used, spent) = {
                let t = self.transcript.lock().expect("transcript");
                (
                    t.input_tokens.saturating_add(t.output_tokens),
                    t.cost.as_ref().map_or(0, |c| c.micros),
                )
            };
            if let Err(reason) = crate::agent::tokens::may_take_turn(
                self.agent,
                &self.rt.project.config.prices,
                used,
                spent,
            ) {
                return Err(Failure {
                    reason,
                    retry: false,
                });
            }
            let body = match conversation {
                Conversation::Anthropic(c) => c.request(
                    &self.model.model_id,
                    self.model.max_tokens,
                    self.model.temperature,
                    self.agent.system_prompt.as_deref(),
                    session.offered(),
                ),
                Conversation::Openai(c) => c.request(
                    &self.model.model_id,
                    self.model.max_tokens,
                    self.model.temperature,
                    session.offered(),
                ),
            };
            let request_span = self.request_span(url);
            let mut request_headers = headers.clone();
            // A third party's: the trace goes to the provider only when `traces.to_providers`.
            if self.rt.project.config.traces.to_providers
                && let Some(cx) = request_span.context()
                && let Ok(value) = reqwest::header::HeaderValue::from_str(&cx.traceparent())
            {
                request_headers.insert("traceparent", value);
            }
            let posted = http::post(http::Request {
                client: &client,
                url: url.to_owned(),
                headers: request_headers,
                body: &body,
                deadline_ms: self.deadline_ms,
                clock: &self.rt.clock,
            })
            .await;
            let (answer, took) = posted.map_err(|failed| {
                request_span.fail("http", &self.rt.project.redactor.text(&failed.why));
                Failure {
                    reason: failed.why,
                    retry: !failed.permanent,
                }
            })?;
            let reply = match conversation {
                Conversation::Anthropic(c) => c.receive(&answer),
                Conversation::Openai(c) => c.receive(&answer),
            }
            .map_err(|e| {
                request_span.fail("malformed_reply", e.what);
                retryable(format!("{url}: {e}"))
            })?;
            let turn = self.record_turn(&reply, took);
            end_request_span(request_span, &reply);
            match &reply.stop {
                Stop::MaxTokens => {
                    return Err(retryable(format!(
                        "the model stopped at max_tokens ({}) before finishing",
                        self.model
                            .max_tokens
                            .map_or("provider default".into(), |n| n.to_string())
                    )));
                }
                Stop::Refusal(why) => {
                    return Err(retryable(format!(
                        "the model refused: {}",
                        truncate(why, 300)
                    )));
                }
                _ => {}
            }
            if reply.calls.is_empty() {
                return self.final_answer(&reply);
            }
            calls_made += reply.calls.len() as u64;
            if let Some(max) = max_calls
                && calls_made > max
            {
                return Err(retryable(format!(
                    "the model asked for more than limits.max_tool_calls ({max}) tool calls; \
                     the last {} were not made",
                    reply.calls.len()
                )));
            }
            // Nor does it make the tool calls of a turn that came back after the cancel.
            if !self.rt.still_holds(self.inv) {
                return Err(Failure {
                    reason: "stopped: the invocation was cancelled while it ran; its last turn's tool calls were not made".into(),
                    retry: false,
                });
            }
            let (results, records) = session
                .call_all(self.rt, self.inv, &reply.calls, self.span)
                .await
                .map_err(retryable)?;
            let riding = self.queued_meanwhile().await;
            let riding_text = (!riding.is_empty()).then(|| {
                format!(
                    "<pap_notifications>\n{}\n</pap_notifications>",
                    crate::notify::queue::prompt_block(&riding).join("\n")
                )
            });
            {
                let mut t = self.transcript.lock().expect("transcript");
                t.turns[turn].tool_calls = records;
                t.turns[turn].carried = riding;
            }
            match conversation {
                Conversation::Anthropic(c) => c.answer(&results, riding_text.as_deref()),
                Conversation::Openai(c) => c.answer(&results, riding_text.as_deref()),
            }
        }
    }

    /// JP RFD 011: notifications queued for the agent while this loop ran, taken to ride
    /// on its next request (a cheap read first: most rounds find the queue empty). A store
    /// that fails here only delays them to the next turn; the loop goes on.
    async fn queued_meanwhile(&self) -> Vec<crate::domain::Carried> {
        use crate::notify::queue;
        let store = self.rt.store.clone();
        let project = self.rt.project.clone();
        let (inv, agent) = (self.inv.id.clone(), self.inv.agent.clone());
        let token = super::lease_token(self.inv);
        let now = self.rt.clock.now_ms();
        let taken = tokio::task::spawn_blocking(move || {
            if !store.read(|r| queue::worth_taking_mid_loop(r, &agent))? {
                return Ok(Vec::new());
            }
            store.write(|tx| {
                // Only the run that holds the invocation takes its agent's queue; what it
                // takes joins the record in the same transaction, so a retry's first
                // message (and a crash) keeps it.
                tx.check_lease(&inv, token)?;
                let carried = queue::deliver_mid_loop(tx, &project, &inv, &agent, now)?;
                if !carried.is_empty()
                    && let Some(mut stored) = tx.invocation(&inv)?
                {
                    stored.notifications.extend(carried.iter().cloned());
                    tx.put_invocation(&stored)?;
                }
                Ok(carried)
            })
        })
        .await;
        match taken {
            Ok(Ok(carried)) => carried,
            Ok(Err(e)) => {
                tracing::warn!(invocation = %self.inv.id, error = %e, "cannot take the agent's queued notifications mid-loop");
                Vec::new()
            }
            Err(_) => Vec::new(),
        }
    }

    /// The span of one request to the model (OpenTelemetry's GenAI conventions: `chat
    /// {model}`, a client span). No message content is put on it.
    fn request_span(&self, url: &str) -> telemetry::Span {
        telemetry::start(
            || format!("chat {}", self.model.model_id),
            telemetry::Parent::Span(self.span),
            telemetry::Kind::Client,
            || {
                let mut attrs = vec![
                    telemetry::Attr::new("gen_ai.operation.name", "chat"),
                    telemetry::Attr::new("gen_ai.provider.name", self.provider.name()),
                    telemetry::Attr::new("gen_ai.request.model", self.model.model_id.clone()),
                ];
                if let Some(n) = self.model.max_tokens {
                    attrs.push(telemetry::Attr::new(
                        "gen_ai.request.max_tokens",
                        i64::from(n),
                    ));
                }
                if let Ok(u) = reqwest::Url::parse(url)
                    && let Some(host) = u.host_str()
                {
                    attrs.push(telemetry::Attr::new("server.address", host.to_owned()));
                    if let Some(port) = u.port_or_known_default() {
                        attrs.push(telemetry::Attr::new("server.port", i64::from(port)));
                    }
                }
                attrs
            },
        )
    }

    fn record_turn(&self, reply: &Reply, took: Duration) -> usize {
        let mut t = self.transcript.lock().expect("transcript");
        // A provider's counts are untrusted: a huge one must not wrap the sums to a small one.
        t.input_tokens = t.input_tokens.saturating_add(reply.input_tokens);
        t.output_tokens = t.output_tokens.saturating_add(reply.output_tokens);
        t.cached_input_tokens = t
            .cached_input_tokens
            .saturating_add(reply.cached_input_tokens);
        t.cache_write_input_tokens = t
            .cache_write_input_tokens
            .saturating_add(reply.cache_write_input_tokens);
        // Priced as it runs, so a run cut short still has what it cost so far.
        t.cost = self.rt.project.config.prices.cost(
            &t.provider,
            &t.model,
            crate::manifest::prices::Usage {
                input: t.input_tokens,
                cached_input: t.cached_input_tokens,
                cache_write: t.cache_write_input_tokens,
                output: t.output_tokens,
            },
        );
        t.turns.push(Turn {
            request_ms: took.as_millis() as u64,
            stop_reason: Some(reply.stop.label()),
            text: truncate(&reply.text, TEXT_KEEP),
            tool_calls: Vec::new(),
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
            cached_input_tokens: reply.cached_input_tokens,
            cache_write_input_tokens: reply.cache_write_input_tokens,
            carried: Vec::new(),
        });
        t.turns.len() - 1
    }

    fn final_answer(&self, reply: &Reply) -> Result<Value, Failure> {
        if let Stop::Other(why) = &reply.stop
            && reply.text.trim().is_empty()
        {
            return Err(retryable(format!(
                "the model stopped ({why}) without an answer"
            )));
        }
        output::parse_answer(&self.agent.output, &reply.text).map_err(|e| retryable(e.to_string()))
    }
}

/// A request's span ends with what the model reported: tokens and why it stopped.
fn end_request_span(span: telemetry::Span, reply: &Reply) {
    span.set_all([
        telemetry::Attr::new("gen_ai.usage.input_tokens", reply.input_tokens as i64),
        telemetry::Attr::new("gen_ai.usage.output_tokens", reply.output_tokens as i64),
        telemetry::Attr::new(
            "gen_ai.usage.cache_read.input_tokens",
            reply.cached_input_tokens as i64,
        ),
        telemetry::Attr::new(
            "gen_ai.usage.cache_creation.input_tokens",
            reply.cache_write_input_tokens as i64,
        ),
        telemetry::Attr::new(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(
                vec![opentelemetry::StringValue::from(reply.stop.label())].into(),
            ),
        ),
    ]);
}

fn retryable(reason: String) -> Failure {
    Failure {
        reason,
        retry: true,
    }
}
