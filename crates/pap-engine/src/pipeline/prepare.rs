//! The part of a decision that needs no store: which triggers an event matches, their
//! filters, idempotency keys and throttle window keys. It depends on the event and the
//! project alone, so `pap dispatch` computes it on the thread that parses events, beside the
//! thread that holds the write transaction (the one that bounds a stream's rate).

use super::Pipeline;
use super::report::ConditionExplain;
use crate::event::Event;
use crate::stages::{Verdict, debounce, filter, idempotency, throttle};

/// What an event's matching triggers decide before the store is consulted.
#[derive(Debug, Default, Clone)]
pub struct Prepared {
    pub triggers: Vec<Considered>,
}

/// One trigger whose type matched the event.
#[derive(Debug, Clone)]
pub struct Considered {
    /// Index into `project.triggers`.
    pub index: usize,
    /// The filter's verdict (`Continue` for a disabled trigger: it is never decided).
    pub filter: Verdict,
    /// Every condition with what it saw, under `--explain` only.
    pub conditions: Vec<ConditionExplain>,
    /// SHA-256(event.id ‖ trigger.id), when the filter passed.
    pub key: Option<[u8; 32]>,
    /// The window key (JSON) of each throttle window, when the filter passed.
    pub(crate) window_keys: Vec<String>,
    /// The debounce's window key (JSON), when the filter passed and the trigger debounces.
    pub(crate) debounce_key: Option<String>,
}

impl Pipeline<'_> {
    /// Everything about `event` that needs no store, in project order of its triggers.
    pub fn prepare(&self, event: &Event) -> Prepared {
        let triggers = self
            .index
            .matching(self.project, &event.kind)
            .into_iter()
            .map(|index| {
                let trigger = &self.project.triggers[index];
                if !trigger.enabled {
                    return Considered {
                        index,
                        filter: Verdict::Continue,
                        conditions: Vec::new(),
                        key: None,
                        window_keys: Vec::new(),
                        debounce_key: None,
                    };
                }
                let verdict = filter::check(trigger, &event.value);
                let conditions = if self.options.explain {
                    trigger
                        .filter
                        .iter()
                        .map(|c| {
                            let checked = filter::evaluate(c, &event.value);
                            let (saw, saw_truncated) = filter::saw_within(
                                &checked.saw,
                                self.project.config.jsonpath_max_saw_bytes,
                            );
                            ConditionExplain {
                                condition: filter::describe(c),
                                holds: checked.holds,
                                saw,
                                saw_truncated,
                                over_budget: checked.over_budget.is_some(),
                            }
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let passed = verdict == Verdict::Continue;
                Considered {
                    index,
                    key: passed.then(|| idempotency::key(&event.id, &trigger.id)),
                    window_keys: if passed {
                        trigger
                            .throttles
                            .iter()
                            .map(|t| throttle::window_key(t, &event.value))
                            .collect()
                    } else {
                        Vec::new()
                    },
                    debounce_key: trigger
                        .debounce
                        .as_ref()
                        .filter(|_| passed)
                        .map(|d| debounce::window_key(d, &event.value)),
                    filter: verdict,
                    conditions,
                }
            })
            .collect();
        Prepared { triggers }
    }
}
