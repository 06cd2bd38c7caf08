//! `prices:` in pap.yaml, compiled: what a million tokens of each model cost, in micros of
//! one currency (see `domain::money`), and what a run's tokens cost at them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::file_ctx::{FileCtx, HelpExt};
use super::raw;
use crate::domain::money::{Cost, cost_of};
use crate::path;

pub const DEFAULT_CURRENCY: &str = "USD";

/// One model's rates, in micros per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    pub input: u64,
    pub output: u64,
    pub cached_input: u64,
    /// Input tokens written to the prompt cache (Anthropic bills them at 1.25× the input
    /// rate for its 5-minute cache: the default).
    pub cache_write: u64,
}

impl Price {
    /// The dearest of the rates: what a run's token bound is reserved at, since the bound
    /// counts input and output together.
    pub fn dearest(&self) -> u64 {
        self.input
            .max(self.output)
            .max(self.cached_input)
            .max(self.cache_write)
    }
}

/// Token counts of a run or a turn, as a provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every input token, cached ones (read or written) included.
    pub input: u64,
    pub cached_input: u64,
    pub cache_write: u64,
    pub output: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prices {
    pub currency: String,
    /// provider → model id → rates (looked up by `&str`, so a lookup allocates nothing).
    models: BTreeMap<String, BTreeMap<String, Price>>,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            currency: DEFAULT_CURRENCY.to_owned(),
            models: BTreeMap::new(),
        }
    }
}

impl Prices {
    pub fn of(&self, provider: &str, model: &str) -> Option<Price> {
        self.models.get(provider)?.get(model).copied()
    }

    /// What `usage` of `provider`'s `model` cost; none when the model has no price.
    pub fn cost(&self, provider: &str, model: &str, usage: Usage) -> Option<Cost> {
        let price = self.of(provider, model)?;
        let read = usage.cached_input.min(usage.input);
        let written = usage.cache_write.min(usage.input - read);
        let plain = usage.input - read - written;
        let micros = cost_of(plain, price.input)
            .saturating_add(cost_of(read, price.cached_input))
            .saturating_add(cost_of(written, price.cache_write))
            .saturating_add(cost_of(usage.output, price.output));
        Some(Cost {
            currency: self.currency.clone(),
            micros,
        })
    }

    #[cfg(test)]
    pub(crate) fn for_tests(provider: &str, model: &str, price: Price) -> Prices {
        let mut p = Prices::default();
        p.models
            .entry(provider.to_owned())
            .or_default()
            .insert(model.to_owned(), price);
        p
    }
}

/// Compiles `prices:`; a bad rate or currency is reported at its field and left out.
pub fn compile(raw: &raw::PriceSettings, ctx: &mut FileCtx) -> Prices {
    let mut prices = Prices::default();
    if let Some(code) = &raw.currency {
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            prices.currency = code.clone();
        } else {
            ctx.at(
                "invalid-price",
                &path!["prices", "currency"],
                format!("currency `{code}` is not an ISO 4217 code (three capital letters)"),
            )
            .help("e.g. `currency: EUR`");
        }
    }
    for (provider, models) in [("anthropic", &raw.anthropic), ("openai", &raw.openai)] {
        for (model, rates) in models {
            let mut rate = |field: &'static str, value: f64| {
                let micros = value * 1_000_000.0;
                if value.is_finite() && value >= 0.0 && micros <= u64::MAX as f64 {
                    Some(micros.round() as u64)
                } else {
                    ctx.at(
                        "invalid-price",
                        &path!["prices", provider, model.as_str(), field],
                        format!(
                            "`{field}` {value} is not a price: a number of {} per million tokens, from 0 to 18,446,744,073,709 (what pap counts in millionths)",
                            prices.currency
                        ),
                    );
                    None
                }
            };
            let input = rate("input", rates.input);
            let output = rate("output", rates.output);
            let cached = rates.cached_input.map(|c| rate("cached_input", c));
            let write = rates.cache_write.map(|c| rate("cache_write", c));
            if let (Some(input), Some(output), None | Some(Some(_)), None | Some(Some(_))) =
                (input, output, cached, write)
            {
                prices
                    .models
                    .entry(provider.to_owned())
                    .or_default()
                    .insert(
                        model.clone(),
                        Price {
                            input,
                            output,
                            cached_input: cached.flatten().unwrap_or(input),
                            cache_write: write.flatten().unwrap_or(input.saturating_mul(5) / 4),
                        },
                    );
            }
        }
    }
    prices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_costs_its_uncached_cached_and_output_tokens_at_their_rates() {
        let prices = Prices::for_tests(
            "anthropic",
            "m",
            Price {
                input: 3_000_000,
                output: 15_000_000,
                cached_input: 300_000,
                cache_write: 3_750_000,
            },
        );
        let usage = Usage {
            input: 10_000,
            cached_input: 8_000,
            cache_write: 1_000,
            output: 500,
        };
        // 1,000 × 3 + 8,000 × 0.3 + 1,000 × 3.75 + 500 × 15 = 3,000 + 2,400 + 3,750 + 7,500.
        assert_eq!(
            prices.cost("anthropic", "m", usage),
            Some(Cost {
                currency: "USD".into(),
                micros: 16_650
            })
        );
        assert_eq!(prices.cost("openai", "m", usage), None);
        // The project cache keeps the compiled project as JSON: prices must round-trip.
        let json = serde_json::to_string(&prices).unwrap();
        assert_eq!(serde_json::from_str::<Prices>(&json).unwrap(), prices);
        assert_eq!(prices.of("anthropic", "m").unwrap().dearest(), 15_000_000);
    }
}
