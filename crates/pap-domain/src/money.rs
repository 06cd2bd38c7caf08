//! Money spent on model tokens (a pap extension): amounts are whole millionths of the price
//! table's currency ("micros"), so sums over thousands of runs are exact and a budget
//! compares integers; a price is what a million tokens cost, so a price times a token count
//! divided by a million is micros.

use serde::{Deserialize, Serialize};

/// What one run cost, in the currency its prices were given in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// An ISO 4217 code as `prices.currency` names it (`USD` by default).
    pub currency: String,
    /// Millionths of the currency.
    pub micros: u64,
}

impl Cost {
    /// `0.004512 USD`: every digit kept, so a displayed amount adds up.
    pub fn display(&self) -> String {
        format!("{} {}", format_micros(self.micros), self.currency)
    }
}

/// Micros as a decimal amount with six places (`1234567` → `1.234567`).
pub fn format_micros(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// What `tokens` cost at `micros_per_million` (a price per million tokens in micros), rounded
/// up: a budget never counts a run as cheaper than it was.
pub fn cost_of(tokens: u64, micros_per_million: u64) -> u64 {
    let exact = u128::from(tokens) * u128::from(micros_per_million);
    u64::try_from(exact.div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_exact_and_round_up() {
        // 1,234 tokens at 3.00 per million: 0.003702.
        assert_eq!(cost_of(1234, 3_000_000), 3702);
        // 1 token at 0.075 per million is 0.000000075: counted as one micro.
        assert_eq!(cost_of(1, 75_000), 1);
        assert_eq!(cost_of(0, 75_000), 0);
        assert_eq!(format_micros(1_234_567), "1.234567");
        assert_eq!(format_micros(42), "0.000042");
        let c = Cost {
            currency: "EUR".into(),
            micros: 5_000_000,
        };
        assert_eq!(c.display(), "5.000000 EUR");
    }
}
