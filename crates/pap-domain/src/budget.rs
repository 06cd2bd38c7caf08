//! An agent's spending over a sliding 24 hours (a pap extension), in tokens and in money:
//! what runs reserved when they started and what finished runs used. A run reserves its most before it starts,
//! so runs that start at once cannot together spend past the budget; when it ends, its
//! reservation becomes what it used.

use serde::{Deserialize, Serialize};

pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUse {
    /// When the run started (ms): it counts for 24 hours from then.
    pub at: i64,
    pub tokens: u64,
    /// Money, in micros of the price table's currency (see `money`): 0 for an agent without
    /// a money budget, and in records written before money budgets.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub micros: u64,
    pub invocation: String,
    /// Still a reservation (the run has not ended).
    pub reserved: bool,
}

/// What a budget counts of a use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Tokens,
    /// Micros of the price table's currency.
    Money,
}

impl Measure {
    pub fn of(self, u: &TokenUse) -> u64 {
        match self {
            Measure::Tokens => u.tokens,
            Measure::Money => u.micros,
        }
    }
}

/// Tokens reserved or used in the 24 hours up to `now`.
pub fn tokens_in_window(uses: &[TokenUse], now: i64) -> u64 {
    in_window(uses, Measure::Tokens, now)
}

/// What `measure` counts of the uses in the 24 hours up to `now`.
pub fn in_window(uses: &[TokenUse], measure: Measure, now: i64) -> u64 {
    uses.iter()
        .filter(|u| u.at > now.saturating_sub(DAY_MS) && u.at <= now)
        .map(|u| measure.of(u))
        .fold(0, u64::saturating_add)
}

/// When `needed` more tokens fit under `max`, as uses leave the window (ms); `None` when
/// they never fit (`needed` alone is more than `max`).
pub fn room_at(uses: &[TokenUse], needed: u64, max: u64, now: i64) -> Option<i64> {
    room_for(uses, Measure::Tokens, needed, max, now)
}

/// As [`room_at`], for what `measure` counts.
pub fn room_for(
    uses: &[TokenUse],
    measure: Measure,
    needed: u64,
    max: u64,
    now: i64,
) -> Option<i64> {
    if needed > max {
        return None;
    }
    let mut live: Vec<&TokenUse> = uses
        .iter()
        .filter(|u| u.at > now.saturating_sub(DAY_MS) && u.at <= now)
        .collect();
    live.sort_by_key(|u| u.at);
    let mut used: u64 = live
        .iter()
        .map(|u| measure.of(u))
        .fold(0, u64::saturating_add);
    if used.saturating_add(needed) <= max {
        return Some(now);
    }
    for u in live {
        used = used.saturating_sub(measure.of(u));
        if used.saturating_add(needed) <= max {
            return Some(u.at.saturating_add(DAY_MS));
        }
    }
    Some(now)
}

/// The uses still in the window at `now`, with `invocation`'s reservation replaced by what it
/// `used` in tokens and `micros` in money (a run that ended).
pub fn settle(uses: &mut Vec<TokenUse>, invocation: &str, used: u64, micros: u64, now: i64) {
    let started = uses
        .iter()
        .find(|u| u.reserved && u.invocation == invocation)
        .map_or(now, |u| u.at);
    uses.retain(|u| !(u.reserved && u.invocation == invocation));
    uses.retain(|u| u.at > now.saturating_sub(DAY_MS));
    if used > 0 || micros > 0 {
        uses.push(TokenUse {
            at: started,
            tokens: used,
            micros,
            invocation: invocation.to_owned(),
            reserved: false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(at: i64, tokens: u64) -> TokenUse {
        TokenUse {
            at,
            tokens,
            micros: tokens * 10,
            invocation: format!("i{at}"),
            reserved: false,
        }
    }

    #[test]
    fn room_comes_back_as_uses_leave_the_window() {
        let uses = [used(0, 600), used(1000, 300)];
        assert_eq!(room_at(&uses, 100, 1000, 2000), Some(2000));
        // 300 more need the first use gone.
        assert_eq!(room_at(&uses, 300, 1000, 2000), Some(DAY_MS));
        assert_eq!(room_at(&uses, 2000, 1000, 2000), None);
        // Money counts its own measure: 9,000 micros used, 1,500 more fit under 10,000
        // once the first use has left the window.
        assert_eq!(in_window(&uses, Measure::Money, 2000), 9000);
        assert_eq!(
            room_for(&uses, Measure::Money, 1500, 10_000, 2000),
            Some(DAY_MS)
        );
    }

    #[test]
    fn records_from_before_money_budgets_read_as_no_money() {
        let old: Vec<TokenUse> =
            serde_json::from_str(r#"[{"at":1,"tokens":5,"invocation":"i","reserved":false}]"#)
                .unwrap();
        assert_eq!(old[0].micros, 0);
        assert!(!serde_json::to_string(&old).unwrap().contains("micros"));
    }

    #[test]
    fn a_reservation_settles_to_what_was_used() {
        let mut uses = vec![TokenUse {
            at: 50,
            tokens: 900,
            micros: 9000,
            invocation: "r".into(),
            reserved: true,
        }];
        settle(&mut uses, "r", 120, 360, 500);
        assert_eq!(
            uses,
            vec![TokenUse {
                at: 50,
                tokens: 120,
                micros: 360,
                invocation: "r".into(),
                reserved: false,
            }]
        );
    }
}
