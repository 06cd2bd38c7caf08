//! Time, injected: the system clock in production, a fake clock in tests.
//!
//! Everything that reads the time or waits (throttle windows, idempotency expiry, approval
//! deadlines, retry backoff) goes through [`Clock`], so a test can move through a 24-hour TTL
//! or a throttle window without sleeping. The fake clock starts at `PAP_NOW` (RFC 3339) and
//! only moves when pap waits: a backoff of 5 s advances it by 5 s at once.
//!
//! `PAP_NOW` is read only by builds with the `test-clock` feature, which the test suite turns
//! on (a dev-dependency of the crate on itself) and `cargo build --release` or `cargo install`
//! never do: in a production binary an environment variable must not be able to move time,
//! since that would let a decided event be decided again or a claim be stored "until 2099".
//! A person testing rules for another moment uses `pap dispatch --dry-run --at TIME`, which
//! writes nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The environment variable that switches on the fake clock (for tests and rule testing).
pub const FAKE_NOW_ENV: &str = "PAP_NOW";

#[derive(Debug, Clone)]
pub enum Clock {
    System,
    Fake(Arc<Mutex<Timestamp>>),
}

impl Clock {
    /// In test builds, the fake clock when `PAP_NOW` is set (an error names a bad value);
    /// otherwise, and always in production builds, the system clock.
    #[cfg(feature = "test-clock")]
    pub fn from_env() -> anyhow::Result<Clock> {
        match std::env::var(FAKE_NOW_ENV) {
            Ok(text) if !text.is_empty() => {
                let at: Timestamp = text.parse().map_err(|err| {
                    anyhow::anyhow!("{FAKE_NOW_ENV}={text:?} is not an RFC 3339 timestamp: {err}")
                })?;
                Ok(Clock::fake(at))
            }
            _ => Ok(Clock::System),
        }
    }

    /// Production builds: the system clock, whatever the environment says.
    #[cfg(not(feature = "test-clock"))]
    pub fn from_env() -> anyhow::Result<Clock> {
        Ok(Clock::System)
    }

    /// Whether this build lets `PAP_NOW` replace the clock (only test builds do).
    pub const fn honours_env() -> bool {
        cfg!(feature = "test-clock")
    }

    pub fn fake(at: Timestamp) -> Clock {
        Clock::Fake(Arc::new(Mutex::new(at)))
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Clock::System => Timestamp::now(),
            Clock::Fake(at) => *at.lock().expect("clock lock"),
        }
    }

    /// Milliseconds since the Unix epoch, the unit the store keeps times in.
    pub fn now_ms(&self) -> i64 {
        self.now().as_millisecond()
    }

    /// Waits `d`: really on the system clock, instantly (advancing time) on the fake one.
    pub async fn sleep(&self, d: Duration) {
        match self {
            Clock::System => tokio::time::sleep(d).await,
            Clock::Fake(at) => self.advance_locked(at, d),
        }
    }

    fn advance_locked(&self, at: &Mutex<Timestamp>, d: Duration) {
        let mut at = at.lock().expect("clock lock");
        let step = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        *at = at.checked_add(step).unwrap_or(Timestamp::MAX);
    }
}

/// RFC 3339 in UTC with millisecond precision, the form every stored and printed time takes.
pub fn rfc3339_ms(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("{ts:.3}"),
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fake_clock_moves_only_when_waiting() {
        let start: Timestamp = "2026-03-11T06:00:00Z".parse().unwrap();
        let clock = Clock::fake(start);
        assert_eq!(clock.now(), start);
        clock.sleep(Duration::from_secs(5)).await;
        assert_eq!(clock.now_ms() - start.as_millisecond(), 5000);
    }

    #[test]
    fn formats_milliseconds_in_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_773_208_800_123), "2026-03-11T06:00:00.123Z");
    }
}
